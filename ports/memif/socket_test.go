//go:build linux

package memif

import "testing"

// TestDefaultSocket: the default socket is a file in linerate's runtime
// directory, as the control socket, never an abstract one.
func TestDefaultSocket(t *testing.T) {
	for _, c := range []struct {
		runtimeDir string
		uid        int
		userDir    string
		want       string
	}{
		{"", 0, "", "/run/linerate/memif.sock"},
		{"/run/linerate", 0, "", "/run/linerate/memif.sock"},
		{"/run/lr:/run/other", 998, "", "/run/lr/memif.sock"},
		{"", 1000, "/run/user/1000", "/run/user/1000/linerate-memif-1000.sock"},
	} {
		if got := defaultSocket(c.runtimeDir, c.uid, c.userDir); got != c.want {
			t.Errorf("%+v: %s", c, got)
		}
	}
	if s := DefaultSocket(); s == "" || s[0] == '@' {
		t.Errorf("DefaultSocket() = %q", s)
	}
}

// TestOffsetsFit: at the largest region check takes, the last byte of the
// last buffer has an offset that fits, and nothing wraps.
func TestOffsetsFit(t *testing.T) {
	o := Options{Socket: "@x", RingSize: 1 << 14, BufferSize: 65535, RxQueues: 2, TxQueues: 1}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	p := &Port{o: o, rx: make([]queue, 2), tx: make([]queue, 1)}
	last := uint64(p.bufOffset(2, uint16(o.RingSize-1))) + uint64(o.BufferSize)
	if last != uint64(p.regionSize()) || last > 1<<32 {
		t.Errorf("last buffer ends at %d, region %d", last, p.regionSize())
	}
}
