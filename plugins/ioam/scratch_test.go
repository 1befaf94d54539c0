package ioam

import (
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// A buffer keeps its scratch when it goes back to its pool. A packet that
// comes in later in the same buffer, with the same data window, and gets a
// parse record from another stage (the route stage parses every packet)
// must not be read through the IOAM scratch of the packet before it: here
// its trace option runs past its header, which the stages drop as
// malformed.
func TestStaleScratch(t *testing.T) {
	for _, kind := range []string{"ioam.transit", "ioam.decap"} {
		t.Run(kind, func(t *testing.T) {
			h := newHarnessOf(t, 1) // one buffer: every packet reuses it
			enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000", hops = 3 }`))
			pre := h.MustBuildNamed("ioam.transit", "pre", nodeKeys(9))
			st := h.MustBuild(kind, nodeKeys(2))
			valid := h.run(buildFrame(t, frameSpec{payload: 20}), 0, false, enc).data
			// A packet with a parse record: pre leaves its IOAM scratch, and
			// the packet goes on through st, and out.
			b := &packet.Burst{}
			hd := h.Pkt(valid, 0)
			if _, err := hd.P().ParseLayers(); err != nil {
				t.Fatal(err)
			}
			b.Push(hd)
			if r := h.runBurst(b, pre, st)[0]; r.data == nil {
				t.Fatalf("dropped: %s", r.dropped)
			}
			bad := append([]byte(nil), valid...)
			bad[14+packet.IPv6Len+4+1] = 0x89 // the trace's Opt Data Len, far past the header
			hd = h.Pkt(bad, 0)
			if _, err := hd.P().ParseLayers(); err != nil {
				t.Fatal(err)
			}
			b.Push(hd)
			if r := h.runBurst(b, st)[0]; r.dropped != "ioam_truncated" {
				t.Errorf("a malformed packet in a reused buffer: dropped %q, want ioam_truncated", r.dropped)
			}
		})
	}
}
