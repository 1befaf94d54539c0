package lpm

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// opPrefix decodes 5 bytes into an update: family, insert or delete, a length
// and an address in a small cluster (so that prefixes nest and share groups).
func opPrefix(b []byte) (v4, del bool, p netip.Prefix, nh uint32) {
	v4, del, nh = b[0]&1 == 0, b[0]&2 != 0, uint32(b[0]>>2)
	if v4 {
		a := netip.AddrFrom4([4]byte{10, b[2] & 3, b[3], b[4]})
		return v4, del, netip.PrefixFrom(a, fuzzLen(b[1], 32)).Masked(), nh
	}
	a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, b[2] & 3, b[3], b[4], 12: b[3] & 0xf, 15: b[4]}
	return v4, del, netip.PrefixFrom(netip.AddrFrom16(a), fuzzLen(b[1], 128)).Masked(), nh
}

// fuzzLen is a prefix length up to max from b: /0 and /8 up, as a length
// from 1 to 7 writes 2^17 to 2^23 entries of tbl24, which would make each
// input take seconds (TestCases covers a /6).
func fuzzLen(b byte, max int) int {
	l := int(b) % (max + 1)
	if l > 0 && l < 8 {
		l += 8
	}
	return l
}

// FuzzUpdates applies any sequence of inserts and deletes to both families'
// tables and holds every answer (at each prefix's edges) to a linear scan.
func FuzzUpdates(f *testing.F) {
	f.Add([]byte{0, 24, 1, 2, 0, 4, 25, 1, 2, 128, 2, 24, 1, 2, 0})
	f.Add([]byte{1, 48, 1, 2, 3, 5, 64, 1, 2, 3, 1, 0, 0, 0, 0, 3, 48, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 32, 3, 255, 255, 2, 0, 0, 0, 0})
	r := rand.New(rand.NewPCG(1, 1))
	seed := make([]byte, 5*64)
	for i := range seed {
		seed[i] = byte(r.IntN(256))
	}
	f.Add(seed)
	t4x, err := New4(64)
	if err != nil {
		f.Fatal(err)
	}
	t6x, err := New6(256)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		tabs := map[bool]table{true: newT4(t4x), false: t6{t6x}}
		rules := map[bool]ref{true: {}, false: {}}
		defer func() { // leave the shared tables empty for the next input
			for v4, rs := range rules {
				for p := range rs {
					if err := tabs[v4].delete(p); err != nil {
						t.Fatalf("clean-up delete %s: %v", p, err)
					}
				}
			}
		}()
		for len(ops) >= 5 {
			v4, del, p, nh := opPrefix(ops)
			ops = ops[5:]
			tab, rs := tabs[v4], rules[v4]
			if del {
				err := tab.delete(p)
				if _, had := rs[p]; had != (err == nil) || err != nil && !errors.Is(err, ErrNotFound) {
					t.Fatalf("delete %s: %v (had it: %v)", p, err, had)
				}
				delete(rs, p)
				continue
			}
			if _, err := tab.insert(p, nh); errors.Is(err, ErrFull) {
				continue
			} else if err != nil {
				t.Fatalf("insert %s: %v", p, err)
			}
			rs[p] = nh
		}
		for v4, rs := range rules {
			check(t, tabs[v4], rs, probes(r, v4, rs, 0), "after the sequence")
		}
	})
}
