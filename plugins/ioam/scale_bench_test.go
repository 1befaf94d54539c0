package ioam

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
)

// scaleNamespaces are the namespace counts of BenchmarkTransitNamespaces.
var scaleNamespaces = []int{1, 16, 256, 4096}

// scaleNSIDs draws n distinct namespace ids, 123 first, and a seeded random
// visiting order of them (a permutation, repeated to at least 4096 packets).
func scaleNSIDs(n int) (ids, order []uint16) {
	r := rand.New(rand.NewPCG(uint64(n), 28))
	seen := map[uint16]bool{123: true}
	ids = []uint16{123}
	for len(ids) < n {
		// Below 0x8000: the upper half is for namespaces of local scope.
		if id := uint16(r.IntN(0x7FFF) + 1); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for len(order) < max(n, 4096) {
		for _, j := range r.Perm(n) {
			order = append(order, ids[j])
		}
	}
	return ids, order
}

// BenchmarkTransitNamespaces runs a transit node that knows N namespaces,
// each with a POT key, on bursts of 64 packets (66-byte frames, a trace of
// type 0xF00000 with room for this node, and a POT option), each of a
// namespace drawn in a seeded random order that visits all N: per packet
// the trace's namespace is looked up and its node data written, and the POT
// option's key is looked up and its share added. Every round first puts the
// packets back (a copy of the frame, the namespace ids written); that reset
// is timed on its own and taken out of ns/pkt. The smallest size runs
// first: x-smallest is each size's ns/pkt over its own in the same run.
func BenchmarkTransitNamespaces(b *testing.B) {
	var base float64
	for si, n := range scaleNamespaces {
		b.Run(fmt.Sprintf("namespaces=%d", n), func(b *testing.B) {
			files := potKeyFiles(b)
			h := newHarness(b)
			enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000", hops = 3 }`)+
				fmt.Sprintf("pot = { namespace = 123, key_file = %q }\n", files[0]))
			frame := h.run(benchFrame(b, 66), 0, false, enc).data
			ids, order := scaleNSIDs(n)
			tr := h.MustBuild("ioam.transit", scaleTransitKeys(b, ids, files[1]))
			// Where the two namespace ids are.
			var s scan
			if err := scanPacket(frame, 14, &s); err != nil || s.nTrace != 1 || s.pot == 0 {
				b.Fatalf("frame: %v, %d traces, POT at %d", err, s.nTrace, s.pot)
			}
			traceNS, potNS := s.trace[0]+OptionHeaderLen, s.pot+OptionHeaderLen
			if binary.BigEndian.Uint16(frame[traceNS:]) != 123 || binary.BigEndian.Uint16(frame[potNS:]) != 123 {
				b.Fatal("namespace ids not where expected")
			}
			bb := newBenchBurst(h, frame)
			defer bb.free()
			k := 0
			reset := func() {
				bb.b.N = packet.MaxBurst
				for i := range bb.b.N {
					p := bb.b.H[i].P()
					p.SetWindow(bb.off, bb.len)
					d := p.Data()
					copy(d, frame)
					id := order[k]
					if k++; k == len(order) {
						k = 0
					}
					binary.BigEndian.PutUint16(d[traceNS:], id)
					binary.BigEndian.PutUint16(d[potNS:], id)
					p.Continue()
				}
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ctx := &h.Ctx
			ctx.Env = &quietEnv{}
			ctx.Now = h.Clock.Now()
			// Warm-up: every namespace once, each filled and its POT updated.
			f0, p0 := h.Counter("filled"), h.Counter("pot_updated")
			for range len(order) / packet.MaxBurst {
				reset()
				tr.Process(ctx, &bb.b)
			}
			want := uint64(len(order) / packet.MaxBurst * packet.MaxBurst)
			if f, p := h.Counter("filled")-f0, h.Counter("pot_updated")-p0; f != want || p != want {
				b.Fatalf("filled %d, pot_updated %d of %d", f, p, want)
			}
			c0 := cputime.Thread()
			for range b.N {
				reset()
			}
			resetNs := cputime.Thread() - c0
			b.ReportAllocs()
			b.ResetTimer()
			c0 = cputime.Thread()
			for range b.N {
				reset()
				tr.Process(ctx, &bb.b)
			}
			cpu := cputime.Thread() - c0
			b.StopTimer()
			for i := range packet.MaxBurst {
				if p := bb.b.H[i].P(); p.Verdict() == packet.Drop {
					b.Fatalf("the stage dropped a packet: %s", p.Reason)
				}
			}
			ns := float64(cpu-resetNs) / (float64(b.N) * packet.MaxBurst)
			b.ReportMetric(ns, "ns/pkt")
			b.ReportMetric(float64(resetNs)/(float64(b.N)*packet.MaxBurst), "reset_ns/pkt")
			if si == 0 {
				base = ns
			}
			b.ReportMetric(ns/base, "x-smallest")
		})
	}
}

// scaleTransitKeys is node 2's transit config with a namespace for each of
// ids (its data field the id's index) and a POT key, potFile, for each.
func scaleTransitKeys(tb testing.TB, ids []uint16, potFile string) string {
	tb.Helper()
	var nsKeys, potKeys strings.Builder
	nsKeys.WriteString("namespaces = [")
	potKeys.WriteString("pot = [")
	for i, id := range ids {
		if i > 0 {
			nsKeys.WriteString(", ")
			potKeys.WriteString(", ")
		}
		fmt.Fprintf(&nsKeys, "{ id = %d, data = %d }", id, i)
		fmt.Fprintf(&potKeys, "{ namespace = %d, key_file = %q }", id, potFile)
	}
	nsKeys.WriteString("]")
	potKeys.WriteString("]\n")
	keys := nodeKeys(2)
	old := regexp.MustCompile(`(?m)^namespaces = .*$`)
	if !old.MatchString(keys) {
		tb.Fatalf("nodeKeys changed: %s", keys)
	}
	return old.ReplaceAllLiteralString(keys, nsKeys.String()) + potKeys.String()
}
