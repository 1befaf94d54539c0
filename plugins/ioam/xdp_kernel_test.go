//go:build linux

package ioam

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/linerate/linerate/plugins/ioam/bpf"
)

// linerate's XDP transit, then the Linux kernel's IOAM transit node, on one
// interface: the device-bound program on lra1 writes its node data as the
// frame arrives, the kernel (ioam6_enabled on lra1) writes its own as it
// forwards, and linerate's decap reads both. The XDP node's bytes are the
// Go stage's for the same frame, but for its timestamps and the fields
// unknown at XDP ingress, and the kernel takes the trace the program left
// (its data lands in the next slot, RemainingLen lowered by both).
func TestXDPTransitThenKernel(t *testing.T) {
	h := newHarness(t)
	kl := newKernelLab(t, h)
	xdpKeys := nodeKeys(2)
	goTr := h.MustBuildNamed("ioam.transit", "tr", xdpKeys).(*transit)
	var prog *bpf.Transit
	var lk link.Link
	err := kl.k.Do(func() error {
		ifi, err := net.InterfaceByName("lra1")
		if err != nil {
			return err
		}
		if prog, err = bpf.LoadTransit(ifi.Index); err != nil {
			return err
		}
		c, nss := goTr.xdpConfig(h.Clock, map[int]uint16{ifi.Index: 0})
		if err := prog.Configure(c, nss); err != nil {
			return err
		}
		lk, err = link.AttachXDP(link.XDPOptions{Program: prog.Program, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if prog != nil {
		t.Cleanup(func() { prog.Close() })
	}
	if err != nil {
		t.Fatalf("the XDP transit on lra1: %v", err)
	}
	t.Cleanup(func() { lk.Close() })
	for _, tt := range []uint32{0xC00000, 0xF00000, 0xFC0000, 0x00E000, 0xFFF002} {
		t.Run(fmt.Sprintf("type=%#06x", tt), func(t *testing.T) {
			room := 4
			if NodeLen(tt) > 8 {
				room = 3
			}
			enc := h.MustBuild("ioam.encap", fmt.Sprintf(`
node_id = 1
node_id_wide = 0x101
timestamp = "posix"
mode = "encap"
src = %q
dst = %q
namespaces = [ { id = 123, data = 0xE1 } ]
[[profiles]]
trace = { namespace = 123, type = "%#06x", hops = %d }
`, kl.outerSrc, kl.outerDst, tt, room))
			dec := h.MustBuild("ioam.decap", `
node_id = 3
node_id_wide = 0x303
timestamp = "posix"
export = true
namespaces = [ { id = 123, data = 0xD3 } ]
`)
			in := buildFrame(t, frameSpec{payload: 300, hopLimit: 40})
			out := h.run(in, 0, false, enc).data
			// What the Go stage writes for the frame lra1 receives.
			want := h.run(kl.kernelMACs(out), 0, false, goTr).data
			got := kl.forward(t, h, out)
			if got == nil {
				t.Fatal("nothing came through the kernel")
			}
			const tr = 14 + 40 + 8
			rem := int(Trace(want[tr:]).RemainingLen())
			ns := goTr.ns.lookup(123)
			var pl nodePlan
			if !pl.build(&ns.Namespace, tt, goTr.eg) {
				t.Fatal("no plan")
			}
			node := tr + TraceHeaderLen + rem*4
			g, w := append([]byte(nil), got[node:node+pl.size]...), append([]byte(nil), want[node:node+pl.size]...)
			for _, off := range []int16{pl.sec, pl.frac, pl.delay, pl.queue, pl.buffer} {
				if off >= 0 {
					clear(g[off : off+4])
					clear(w[off : off+4])
				}
			}
			if !bytes.Equal(g, w) {
				t.Errorf("the XDP node's data, as the kernel forwarded it:\n%x\nthe Go stage's:\n%x", g, w)
			}
			if r := Trace(got[tr:]).RemainingLen(); r != rem-NodeLen(tt)-opaqueOf(tt) {
				t.Errorf("RemainingLen %d after the kernel, %d after linerate's node", r, rem)
			}
			r := h.run(got, 1, false, dec)
			if !bytes.Equal(r.data[14:], in[14:]) {
				t.Error("decap output is not the original packet")
			}
			recs := drainRecords(t, dec)
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			hops := recs[0].Hops()
			if len(hops) != room { // a trace of room 3 has none left for decap
				t.Fatalf("%d hops, want encap, XDP transit, kernel (and decap with room)", len(hops))
			}
			x, k := hops[1], hops[2]
			if tt&TraceHopLimNodeID != 0 && (x.NodeID != 2 || k.NodeID != kNodeID || x.HopLimit != k.HopLimit+1) {
				t.Errorf("XDP hop %+v, kernel hop %+v", x.Node, k.Node)
			}
		})
	}
}

// opaqueOf is the words of an empty opaque snapshot, the kernel's and the
// test config's.
func opaqueOf(tt uint32) int {
	if tt&TraceOpaqueState != 0 {
		return 1
	}
	return 0
}
