//go:build linux

package memif_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/testpmd"
	"github.com/linerate/linerate/ports/memif"
)

// TestTestPMD sends frames through DPDK's own net_memif, in dpdk-testpmd's io
// forward mode, and checks that each comes back byte for byte, once: linerate
// as the client of testpmd's server and as the server of testpmd's client, on
// a filesystem socket (testpmd's socket-abstract=no, as linerate's default
// socket needs) and on an abstract socket (DPDK's default, linerate's by
// choice). testpmd runs as root, whom the port allows.
func TestTestPMD(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server bool // linerate's role
		socket func(dir string) string
	}{
		{"client-path", false, func(dir string) string { return filepath.Join(dir, "memif.sock") }},
		{"server-path", true, func(dir string) string { return filepath.Join(dir, "memif.sock") }},
		{"client-abstract", false, func(string) string { return fmt.Sprintf("@/run/lrtest-%d.sock", rand.Uint32()) }},
		{"server-abstract", true, func(string) string { return fmt.Sprintf("@/run/lrtest-%d.sock", rand.Uint32()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := tc.socket(t.TempDir())
			pool, err := packet.NewSlab(packet.SlabConfig{Name: "memif-" + tc.name, Buffers: 1024})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := pool.Close(); err != nil {
					t.Error(err)
				}
			})
			var port *memif.Port
			if tc.server { // our server first: testpmd's client connects at start
				port, err = memif.New(memif.Options{Name: "m0", Server: true, Socket: sock, Pool: pool})
				if err != nil {
					t.Fatal(err)
				}
				testpmd.Start(t, "client", sock)
			} else {
				testpmd.Start(t, "server", sock)
				port, err = memif.New(memif.Options{Name: "m0", Socket: sock, Pool: pool})
				if err != nil {
					t.Fatal(err)
				}
			}
			defer port.Close()
			roundTrip(t, port, pool, 1000)
		})
	}
}

// roundTrip sends n frames of random sizes and contents and waits for each to
// come back unchanged, in order, and no frame more: a descriptor read twice,
// or a slot read that the peer never filled, is one frame too many.
func roundTrip(t *testing.T, port *memif.Port, pool packet.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !port.Info().LinkUp {
		if time.Now().After(deadline) {
			t.Fatal("memif never connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want [][]byte
	for i := 0; i < n; i++ {
		f := make([]byte, 60+rng.IntN(1455))
		for j := range f {
			f[j] = byte(rng.Uint32())
		}
		copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 1})
		f[12], f[13] = 0x88, 0xb5 // local experimental ethertype
		want = append(want, f)
	}
	var got [][]byte
	sent := 0
	var b, rx packet.Burst
	deadline = time.Now().Add(60 * time.Second)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames back after 60s; port stats %+v", len(got), n, port.Stats())
		}
		for b.N < 16 && sent+b.N < n {
			if pool.Alloc(&b, 1) == 0 {
				break
			}
			pk := b.H[b.N-1].P()
			d, _ := pk.Append(len(want[sent+b.N-1]))
			copy(d, want[sent+b.N-1])
		}
		if b.N > 0 {
			k := port.TxBurst(0, &b)
			copy(b.H[:], b.H[k:b.N])
			b.N -= k
			sent += k
		}
		rx.N = 0
		port.RxBurst(0, &rx)
		for _, h := range rx.Handles() {
			got = append(got, bytes.Clone(h.P().Data()))
		}
		packet.Free(&rx)
		if rx.N == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	packet.Free(&b)
	// testpmd has echoed all it got; anything now is one frame too many.
	for range 200 {
		rx.N = 0
		port.RxBurst(0, &rx)
		for _, h := range rx.Handles() {
			got = append(got, bytes.Clone(h.P().Data()))
		}
		packet.Free(&rx)
		time.Sleep(100 * time.Microsecond)
	}
	if len(got) != n {
		t.Errorf("%d frames back for %d sent", len(got), n)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: %d bytes came back as %d bytes, different", i, len(want[i]), len(got[i]))
		}
	}
	s := port.Stats()
	if s.TxPackets != uint64(n) || s.RxPackets != uint64(n) || s.RxDropped+s.TxDropped != 0 {
		t.Errorf("stats %+v", s)
	}
}
