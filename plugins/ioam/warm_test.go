package ioam

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// TestTransitWarmedSameResult runs two transit nodes that know more
// namespaces than the node warms from (warmNamespaces), each with a POT
// key: bursts of 64 packets of mixed namespaces through one (warmed), the
// same packets one at a time through the other (a burst of one is never
// warmed). Every packet leaves both byte for byte the same: node data, POT
// cumulative value and all.
func TestTransitWarmedSameResult(t *testing.T) {
	files := potKeyFiles(t)
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000", hops = 3 }`)+
		fmt.Sprintf("pot = { namespace = 123, key_file = %q }\n", files[0]))
	frame := h.run(buildFrame(t, frameSpec{payload: 66 - 4 - 14 - 40 - 8}), 0, false, enc).data
	ids, order := scaleNSIDs(warmNamespaces + 76)
	keys2 := scaleTransitKeys(t, ids, files[1])
	warmed := h.MustBuild("ioam.transit", keys2)
	single := h.MustBuild("ioam.transit", keys2)
	var s scan
	if err := scanPacket(frame, 14, &s); err != nil || s.nTrace != 1 || s.pot == 0 {
		t.Fatalf("frame: %v, %d traces, POT at %d", err, s.nTrace, s.pot)
	}
	traceNS, potNS := s.trace[0]+OptionHeaderLen, s.pot+OptionHeaderLen
	frameOf := func(k int) []byte {
		f := append([]byte(nil), frame...)
		binary.BigEndian.PutUint16(f[traceNS:], order[k])
		binary.BigEndian.PutUint16(f[potNS:], order[k])
		binary.BigEndian.PutUint64(f[potNS+4:], uint64(k)*0x9E3779B97F4A7C15) // the POT random
		return f
	}
	for k := 0; k+packet.MaxBurst <= 2*len(ids); k += packet.MaxBurst {
		b := &packet.Burst{}
		for j := range packet.MaxBurst {
			b.Push(h.Pkt(frameOf(k+j), 0))
		}
		got := h.runBurst(b, warmed)
		for j := range packet.MaxBurst {
			want := h.run(frameOf(k+j), 0, false, single)
			if got[j].dropped != want.dropped || !bytes.Equal(got[j].data, want.data) {
				t.Fatalf("packet %d: burst %q %x, alone %q %x", k+j, got[j].dropped, got[j].data, want.dropped, want.data)
			}
			if bytes.Equal(got[j].data, frameOf(k+j)) {
				t.Fatalf("packet %d: the node changed nothing", k+j)
			}
		}
	}
}
