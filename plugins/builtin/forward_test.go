package builtin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

func TestForward(t *testing.T) {
	macC := [6]byte{2, 0, 0, 0, 0, 0xc}
	macD := [6]byte{2, 0, 0, 0, 0, 0xd}
	for _, c := range []struct {
		name     string
		keys     string
		in       uint16
		wantPort uint16
		wantDst  [6]byte
		wantSrc  [6]byte
	}{
		{"port by name", `port = "eth1"`, portEth0, portEth1, macB, macA},
		{"internal port", `port = "ring0"`, portEth0, portRing0, macB, macA},
		{"back out of the port it came in on", `port = "in"`, portEth1, portEth1, macB, macA},
		{"in, from a ring", `port = "in"`, portRing0, portRing0, macB, macA},
		{"swap_mac", "port = \"in\"\nswap_mac = true", portEth0, portEth0, macA, macB},
		{"swap_mac to a port", "port = \"eth1\"\nswap_mac = true", portEth0, portEth1, macA, macB},
		{"dst_mac", "port = \"eth0\"\ndst_mac = \"02:00:00:00:00:0d\"", portEth1, portEth0, macD, macA},
		{"src_mac", "port = \"eth0\"\nsrc_mac = \"02-00-00-00-00-0c\"", portEth1, portEth0, macB, macC},
		{"both", "port = \"eth0\"\nsrc_mac = \"02:00:00:00:00:0c\"\ndst_mac = \"0200.0000.000d\"", portEth1, portEth0, macD, macC},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			st := h.mustBuild("forward", c.keys)
			frames := [][]byte{udp6(1, 2).bytes(), frame{v4: true, src: "192.0.2.1", dst: "192.0.2.2", vlan: 5}.bytes(),
				frame{etherType: packet.EtherTypeARP}.bytes(), make([]byte, 14)}
			copy(frames[3], append(macB[:], macA[:]...))
			o := h.run(h.Burst(c.in, frames...), st)
			defer o.Free()
			if len(o.Forwarded) != len(frames) {
				t.Fatalf("%v; want all %d forwarded", o, len(frames))
			}
			for i, f := range o.Forwarded {
				d := f.H.P().Data()
				if f.Port != c.wantPort {
					t.Errorf("packet %d: to port %d, want %d", i, f.Port, c.wantPort)
				}
				if !bytes.Equal(d[0:6], c.wantDst[:]) || !bytes.Equal(d[6:12], c.wantSrc[:]) {
					t.Errorf("packet %d: MACs dst % x src % x, want dst % x src % x", i, d[0:6], d[6:12], c.wantDst, c.wantSrc)
				}
				if !bytes.Equal(d[12:], frames[i][12:]) {
					t.Errorf("packet %d: bytes after the MACs changed", i)
				}
			}
		})
	}
}

// TestForwardShortFrame: less than an Ethernet header is dropped as malformed;
// the rest of the burst still goes.
func TestForwardShortFrame(t *testing.T) {
	h := newHarness(t)
	st := h.mustBuild("forward", "port = \"eth1\"\nswap_mac = true")
	o := h.run(h.Burst(portEth0, udp6(1, 2).bytes(), make([]byte, 13), nil, udp6(3, 4).bytes()), st)
	defer o.Free()
	if len(o.Forwarded) != 2 || o.Dropped[packet.ReasonMalformed.String()] != 2 || len(o.Dropped) != 1 {
		t.Fatalf("%v; want 2 forwarded, 2 malformed", o)
	}
}

func TestForwardConfigErrors(t *testing.T) {
	for _, c := range []struct{ keys, want string }{
		{``, "forward needs a port"},
		{`port = "eth9"`, `forward: no port "eth9"`},
		{"port = \"in\"\nswap_mac = true\nsrc_mac = \"02:00:00:00:00:01\"", "swap_mac and src_mac/dst_mac exclude each other"},
		{"port = \"in\"\ndst_mac = \"02:00:00:00:01\"", "forward#0.toml:2: dst_mac: invalid MAC address"},
		{"port = \"in\"\nswapmac = true", `forward#0.toml:2: swapmac: unknown key (did you mean "swap_mac"?)`},
		{"port = 1", "forward#0.toml:1: port"},
	} {
		h := newHarness(t)
		if _, err := h.build("forward", c.keys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.keys, err, c.want)
		}
	}
}

// TestCounter: the counter counts packets and bytes and lets them all continue.
func TestCounter(t *testing.T) {
	h := newHarness(t)
	st := h.mustBuild("counter", "")
	sizes := []int{60, 1514, 14, 0, 9000 - 7000}
	var frames [][]byte
	total := 0
	for _, n := range sizes {
		frames = append(frames, make([]byte, n))
		total += n
	}
	for round := 1; round <= 3; round++ {
		o := h.run(h.Burst(portEth0, frames...), st)
		if len(o.Continued) != len(frames) || len(o.Forwarded)+len(o.Dropped)+o.Consumed != 0 {
			t.Fatalf("%v; want every packet to continue", o)
		}
		o.Free()
		if got, want := h.Counter("packets"), uint64(round*len(frames)); got != want {
			t.Errorf("packets %d, want %d", got, want)
		}
		if got, want := h.Counter("bytes"), uint64(round*total); got != want {
			t.Errorf("bytes %d, want %d", got, want)
		}
	}
	if _, err := h.build("counter", `port = "eth0"`); err == nil || !strings.Contains(err.Error(), "counter#0.toml:1: port: unknown key") {
		t.Errorf("counter with a key: error %v", err)
	}
}
