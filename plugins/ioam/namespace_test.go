package ioam

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// encapNS is the config of an encapsulating node of namespace ns in mode,
// with extra profile keys.
func encapNS(ns int, mode, extra string) string {
	return fmt.Sprintf(`
node_id = %d
mode = %q
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
namespaces = [ { id = %d } ]
[[profiles]]
trace = { namespace = %d, type = "0xF00000", hops = 3 }
%s`, ns, mode, ns, ns, extra)
}

// ioam.decap reads and removes the IOAM data of the namespaces it knows, and
// only those: another domain's options pass untouched, inline or in an outer
// header, and such a packet is not counted as decapsulated.
func TestDecapLeavesOtherNamespaces(t *testing.T) {
	for _, mode := range []string{"auto", "encap", "inline"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t)
			build := func(name string, ns int, mode, extra string) plugins.Stage {
				return h.MustBuildNamed("ioam.encap", name, encapNS(ns, mode, extra))
			}
			enc7, enc123 := build("enc7", 7, "encap", ""), build("enc123", 123, "encap", "")
			inl7, inl123 := build("inl7", 7, "inline", ""), build("inl123", 123, "inline", "")
			inl123e2e7 := build("inl123e2e7", 123, "inline", "e2e = { namespace = 7, type = \"0xC000\" }\n")
			dec := h.MustBuildNamed("ioam.decap", "dec", nodeKeys(9)+fmt.Sprintf("mode = %q\nexport = true\n", mode))
			plain := buildFrame(t, frameSpec{payload: 100})
			decapsulated := func() uint64 { return h.StageCounter("dec", "decapsulated") }

			// Only another namespace's IOAM, in an outer header or inline.
			for _, st := range []plugins.Stage{enc7, inl7} {
				in := h.run(plain, 0, true, st).data
				n := decapsulated()
				if r := h.run(in, 0, false, dec); !bytes.Equal(r.data, in) {
					t.Errorf("another namespace's IOAM changed\n got % x\nwant % x", r.data, in)
				}
				if decapsulated() != n {
					t.Error("a packet of another namespace counted as decapsulated")
				}
			}
			if n := h.StageCounter("dec", "unknown_namespace"); n != 2 {
				t.Errorf("unknown_namespace %d, want 2", n)
			}
			if recs := drainRecords(t, dec); len(recs) != 0 {
				t.Errorf("%d records of another namespace's packets", len(recs))
			}

			// Two domains inline, ours added last: ours goes, the other's stays
			// where it was, as it was.
			only7 := h.run(plain, 0, true, inl7).data
			both := h.run(plain, 0, true, inl7, inl123).data
			if len(both) <= len(only7) {
				t.Fatal("the second trace was not added")
			}
			r := h.run(both, 0, false, layersCheck{t}, dec)
			if mode == "encap" {
				// Encap mode removes outer headers only: it reads ours (and
				// adds its data to it) and leaves the packet its length.
				opt7 := 58 + 2 + int(both[59]) // the first option, the other's trace
				if len(r.data) != len(both) || !bytes.Equal(r.data[:opt7], both[:opt7]) {
					t.Errorf("encap mode touched the other namespace's trace\n got % x\nwant % x", r.data, both)
				}
			} else if !bytes.Equal(r.data, only7) {
				t.Errorf("ours removed, the other kept\n got % x\nwant % x", r.data, only7)
			}
			if len(r.data) > 54 && r.data[20] == packet.ProtocolHopByHop {
				kernelCheckHeader(t, r.data, 14, 54)
			}

			// Ours in the Hop-by-Hop header, another's E2E in a Destination
			// Options header: the Destination Options header stays.
			in := h.run(plain, 0, true, inl123e2e7).data
			r = h.run(in, 0, false, dec)
			var s scan
			if err := scanPacket(r.data, 14, &s); err != nil {
				t.Fatal(err)
			}
			if mode == "encap" {
				if len(r.data) != len(in) || s.e2e == 0 {
					t.Error("encap mode removed inline options")
				}
			} else if s.hbh != 0 || s.e2e == 0 || E2E(Option(r.data[s.e2e:]).Body()).NamespaceID() != 7 ||
				!bytes.Equal(r.data[s.nextOff:], plain[54:]) {
				t.Errorf("Hop-by-Hop %d, E2E %d: % x", s.hbh, s.e2e, r.data)
			}
			var l packet.Layers
			if err := packet.Parse(r.data, &l); err != nil || l.UDPChecksum(r.data) != packet.UDP(r.data[l.L4:]).Checksum() {
				t.Errorf("the packet left does not parse (%v) or its UDP checksum broke", err)
			}

			// An outer header of ours goes whole, and with it whatever
			// another domain put in it.
			out := h.run(h.run(plain, 0, false, enc123).data, 0, false, dec).data
			if mode == "inline" {
				if packet.IPv6(out[14:]).NextHeader() != packet.ProtocolIPv6 {
					t.Error("inline mode did not leave the outer header")
				}
			} else if !bytes.Equal(out, plain) {
				t.Errorf("outer header of ours not removed\n got % x\nwant % x", out, plain)
			}
		})
	}
}

// A POT key is for one of the node's namespaces: one for a namespace the
// node does not know is a config error that says so.
func TestPOTNamespaceKnown(t *testing.T) {
	keys, err := DealPOT(2, 0xFFFFFFFFFFFFFFC5, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "k.toml")
	if err := WritePOTKey(f, &keys[1]); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	for _, kind := range []string{"ioam.transit", "ioam.decap"} {
		_, err := h.Build(kind, nodeKeys(2)+fmt.Sprintf("pot = [ { namespace = 5, key_file = %q } ]\n", f))
		if err == nil || !strings.Contains(err.Error(), "pot[0]: namespace 5 is not among the stage's namespaces") {
			t.Errorf("%s: %v", kind, err)
		}
		h.MustBuild(kind, nodeKeys(2)+fmt.Sprintf("pot = [ { namespace = 123, key_file = %q } ]\n", f))
	}
}
