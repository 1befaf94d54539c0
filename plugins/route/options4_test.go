package route

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/packet"
)

// withOptions4 is the IPv4 frame f with opts after its 20-byte header, padded
// with End of Option List to a 4-byte unit, and the header's IHL, total
// length and checksum made to match.
func withOptions4(f, opts []byte) []byte {
	pad := make([]byte, (len(opts)+3)&^3)
	copy(pad, opts)
	out := append(append(bytes.Clone(f[:14+20]), pad...), f[14+20:]...)
	ip := packet.IPv4(out[14:])
	out[14] = 0x40 | byte((20+len(pad))/4)
	ip.SetTotalLength(ip.TotalLength() + uint16(len(pad)))
	ip.SetChecksum(0)
	ip.SetChecksum(ip.CalculateChecksum())
	return out
}

var (
	optLSRR  = []byte{131, 7, 4, 198, 51, 100, 2} // one hop, pointer at it
	optSSRR  = []byte{137, 7, 4, 198, 51, 100, 2} //
	optRR    = []byte{7, 7, 4, 0, 0, 0, 0}        // record route
	optRA    = []byte{148, 4, 0, 0}               // router alert
	optTS    = []byte{68, 8, 5, 0, 0, 0, 0, 0}    // timestamp
	optShort = []byte{131, 2}                     // a source route with no room for a hop: still one
	eol      = []byte{0}                          //
	nop      = []byte{1}                          //
	cat      = func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
)

// TestSourceRoute4 walks options as RFC 791 §3.1 lays them out: a source
// route (LSRR, SSRR) anywhere, after NOPs or other options; nothing after
// End of Option List counts; an option whose length is under 2 or runs past
// the header cannot be walked.
func TestSourceRoute4(t *testing.T) {
	for _, c := range []struct {
		name    string
		opts    []byte
		srr, ok bool
	}{
		{"none", nil, false, true},
		{"LSRR", optLSRR, true, true},
		{"SSRR", optSSRR, true, true},
		{"NOPs then LSRR", cat(nop, nop, nop, optLSRR), true, true},
		{"record route then SSRR", cat(optRR, optSSRR), true, true},
		{"timestamp, router alert, LSRR last", cat(optTS, optRA, nop, optLSRR), true, true},
		{"LSRR of length 2", optShort, true, true},
		{"router alert only", optRA, false, true},
		{"record route, NOPs", cat(optRR, nop, nop, nop), false, true},
		{"LSRR after End of Option List", cat(optRA, eol, optLSRR), false, true},
		{"LSRR's bytes inside another option", []byte{68, 12, 5, 0, 131, 7, 4, 1, 2, 3, 4, 0}, false, true},
		{"length 0", cat(optRA, []byte{7, 0, 0, 0}), false, false},
		{"length 1", cat(nop, []byte{7, 1}, optLSRR), false, false},
		{"length past the header", cat(optRA, []byte{7, 40, 4}), false, false},
		{"type without length", cat(optRR, []byte{148}), false, false},
		{"LSRR running past the header", optLSRR[:5], false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srr, ok := sourceRoute4(c.opts)
			if srr != c.srr || ok != c.ok {
				t.Errorf("sourceRoute4(% x) = %v, %v; want %v, %v", c.opts, srr, ok, c.srr, c.ok)
			}
		})
	}
}

// TestRouteSourceRoute: IPv4 packets with a loose or strict source route are
// dropped as route_source_route, as Linux does with accept_source_route = 0,
// whether they would be forwarded or are for linerate; with
// accept_source_route = true they are routed by their destination. Options
// that cannot be walked are malformed either way; other options pass.
func TestRouteSourceRoute(t *testing.T) {
	fwd := udp4(t, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 40)
	local := udp4(t, host1, mac0, "192.0.2.2", "192.0.2.1", 64, 40)
	for _, accept := range []bool{false, true} {
		t.Run(fmt.Sprint("accept_source_route = ", accept), func(t *testing.T) {
			h := newHarness(t)
			r := h.build("route", fmt.Sprint("accept_source_route = ", accept))
			h.routed().Neighbors().SetStatic(port1, a16("::ffff:198.51.100.2"), host2, h.Clock.Now())
			srrWant := "route_source_route"
			if accept {
				srrWant = ""
			}
			for _, c := range []struct {
				name  string
				frame []byte
				want  string // drop reason; "" forwarded (or passed on, for local)
			}{
				{"LSRR", withOptions4(fwd, optLSRR), srrWant},
				{"SSRR", withOptions4(fwd, optSSRR), srrWant},
				{"NOP, record route, SSRR", withOptions4(fwd, cat(nop, optRR, optSSRR)), srrWant},
				{"LSRR to us", withOptions4(local, optLSRR), srrWant},
				{"router alert", withOptions4(fwd, optRA), ""},
				{"LSRR after End of Option List", withOptions4(fwd, cat(optRA, eol, optLSRR)), ""},
				{"length 0", withOptions4(fwd, []byte{7, 0, 0, 0}), "malformed"},
				{"length past the header", withOptions4(fwd, cat(optRA, []byte{7, 40, 4})), "malformed"},
				{"no options", fwd, ""},
			} {
				o := h.run(port0, [][]byte{c.frame}, r)
				switch {
				case c.want != "" && (o.Dropped[c.want] != 1 || len(o.Forwarded)+len(o.Continued) != 0):
					t.Errorf("%s: outcome %+v, want dropped as %s", c.name, o, c.want)
				case c.want == "" && len(o.Forwarded)+len(o.Continued) != 1:
					t.Errorf("%s: outcome %+v, want it routed", c.name, o)
				}
				o.Free()
			}
		})
	}
}

// FuzzSourceRoute4: on the options of a header, the walker never panics,
// leaves them as they were, and agrees with gopacket's IPv4 option decoder:
// where that decodes (it takes no option of length 2), on whether there is a
// source route, and where the walker finds a malformed option, by failing.
func FuzzSourceRoute4(f *testing.F) {
	for _, s := range [][]byte{nil, optLSRR, optSSRR, cat(nop, nop, optLSRR), cat(optRR, optSSRR), cat(optRA, eol, optLSRR),
		[]byte{7, 0, 0, 0}, []byte{7, 1}, cat(optRA, []byte{7, 40, 4}), optShort, []byte{148}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, opts []byte) {
		if len(opts) > 40 {
			opts = opts[:40]
		}
		// The options as a header holds them, padded to a 4-byte unit.
		frame := withOptions4(udp4(t, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 0), opts)
		opts = packet.IPv4(frame[14:]).Options()
		keep := bytes.Clone(opts)
		srr, ok := sourceRoute4(opts)
		if !bytes.Equal(opts, keep) {
			t.Fatal("the walker changed the options")
		}
		// Fragmentation walks them the same way.
		var dst [copiedOptionsMax]byte
		if n := copiedOptions(dst[:], opts); n%4 != 0 || n > len(opts) {
			t.Fatalf("% x: %d bytes of copied options", opts, n)
		}
		var ip layers.IPv4
		err := ip.DecodeFromBytes(frame[14:], gopacket.NilDecodeFeedback)
		if !ok && err == nil {
			t.Fatalf("% x: the walker finds a malformed option, gopacket decodes %+v", opts, ip.Options)
		}
		if err != nil {
			return
		}
		theirs := false
		for _, o := range ip.Options {
			theirs = theirs || o.OptionType == 131 || o.OptionType == 137
		}
		if theirs != srr {
			t.Fatalf("% x: source route %v, gopacket finds %v in %+v", opts, srr, theirs, ip.Options)
		}
	})
}
