package packet

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket"
)

// refSum is RFC 1071's loop as written: big-endian words, 32-bit accumulator
// folded as it goes.
func refSum(b []byte, initial uint16) uint16 {
	s := uint64(initial)
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// same reports a == b in ones'-complement arithmetic, where 0 and 0xffff are
// both zero.
func same(a, b uint16) bool {
	return a == b || a == 0 && b == 0xffff || a == 0xffff && b == 0
}

func TestChecksumRFC1071(t *testing.T) {
	// RFC 1071 §3: the sum of 00 01 f2 03 f4 f5 f6 f7 is ddf2.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := Checksum(b, 0); got != 0xddf2 {
		t.Fatalf("Checksum = %#04x, want 0xddf2", got)
	}
	// The header of an IPv4 packet with its well-known checksum b861.
	h := IPv4(mustHex(t, "4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7"))
	if got := h.CalculateChecksum(); got != 0xb861 {
		t.Errorf("IPv4 checksum = %#04x, want 0xb861", got)
	}
	if !h.IsChecksumValid() {
		t.Error("IsChecksumValid = false")
	}
	h[10] ^= 1
	if h.IsChecksumValid() {
		t.Error("IsChecksumValid = true with a flipped bit")
	}
}

func TestChecksumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	buf := randBytes(r, 2048)
	for n := 0; n <= 700; n++ {
		for _, start := range []int{0, 1, 3, 8} { // unaligned too
			b := buf[start : start+n]
			init := uint16(r.Uint32())
			want := refSum(b, init)
			if got := Checksum(b, init); !same(got, want) {
				t.Fatalf("len %d start %d: Checksum = %#04x, reference %#04x", n, start, got, want)
			}
			// gopacket's ComputeChecksum and FoldChecksum (complemented).
			if g := gopacket.FoldChecksum(gopacket.ComputeChecksum(b, 0)); !same(^Checksum(b, 0), g) {
				t.Fatalf("len %d: ^Checksum = %#04x, gopacket %#04x", n, ^Checksum(b, 0), g)
			}
		}
	}
	// Carries: all ones, all the way.
	ff := make([]byte, 65536+7)
	for i := range ff {
		ff[i] = 0xff
	}
	for _, n := range []int{2, 31, 32, 33, 4096, 65536, 65543} {
		if got, want := Checksum(ff[:n], 0xffff), refSum(ff[:n], 0xffff); !same(got, want) {
			t.Errorf("0xff × %d: %#04x, reference %#04x", n, got, want)
		}
	}
}

func TestChecksumCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for i := 0; i < 1000; i++ {
		a, b := randBytes(r, 2*r.IntN(100)), randBytes(r, r.IntN(200))
		whole := Checksum(append(append([]byte{}, a...), b...), 0)
		if got := ChecksumCombine(Checksum(a, 0), Checksum(b, 0)); !same(got, whole) {
			t.Fatalf("combine %#04x, whole %#04x", got, whole)
		}
		if got := Checksum(b, Checksum(a, 0)); !same(got, whole) {
			t.Fatalf("chained %#04x, whole %#04x", got, whole)
		}
	}
}

func TestPseudoHeaderChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for i := 0; i < 1000; i++ {
		for _, alen := range []int{4, 16} {
			src, dst := randBytes(r, alen), randBytes(r, alen)
			length := r.Uint32()
			proto := uint8(r.Uint32())
			// RFC 8200 §8.1 and RFC 768 pseudo-headers, spelt out.
			var ph []byte
			ph = append(ph, src...)
			ph = append(ph, dst...)
			if alen == 16 {
				ph = binary.BigEndian.AppendUint32(ph, length)
				ph = append(ph, 0, 0, 0, proto)
			} else {
				length &= 0xffff
				ph = append(ph, 0, proto)
				ph = binary.BigEndian.AppendUint16(ph, uint16(length))
			}
			if got, want := PseudoHeaderChecksum(proto, src, dst, length), refSum(ph, 0); !same(got, want) {
				t.Fatalf("alen %d: %#04x, want %#04x", alen, got, want)
			}
		}
	}
}

func TestChecksumUpdateRFC1624(t *testing.T) {
	// RFC 1624 §4: HC 0xdd2f, a word 0x5555 → 0x3285. Eqn. 3 gives 0x0000
	// (eqn. 2 would give the wrong 0xffff).
	if got := ChecksumUpdate16(0xdd2f, 0x5555, 0x3285); got != 0x0000 {
		t.Fatalf("ChecksumUpdate16 = %#04x, want 0x0000", got)
	}
}

// TestChecksumUpdate: incremental updates of 16-bit, 32-bit and byte-range
// changes agree with recomputing over the changed data.
func TestChecksumUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for i := 0; i < 5000; i++ {
		data := randBytes(r, 4+r.IntN(300))
		hc := ^Checksum(data, 0)

		// 16-bit field at an even offset.
		at := 2 * r.IntN(len(data)/2)
		old := binary.BigEndian.Uint16(data[at:])
		nw := uint16(r.Uint32())
		binary.BigEndian.PutUint16(data[at:], nw)
		hc16 := ChecksumUpdate16(hc, old, nw)
		if full := ^Checksum(data, 0); !same(hc16, full) {
			t.Fatalf("16-bit: %#04x, full %#04x", hc16, full)
		}

		// 32-bit field at an even offset.
		at = 2 * r.IntN((len(data)-2)/2)
		old32 := binary.BigEndian.Uint32(data[at:])
		nw32 := r.Uint32()
		binary.BigEndian.PutUint32(data[at:], nw32)
		hc32 := ChecksumUpdate32(hc16, old32, nw32)
		if full := ^Checksum(data, 0); !same(hc32, full) {
			t.Fatalf("32-bit: %#04x, full %#04x", hc32, full)
		}

		// A byte range at any offset, of any length.
		at = r.IntN(len(data))
		n := r.IntN(len(data) - at + 1)
		oldB := append([]byte(nil), data[at:at+n]...)
		nwB := randBytes(r, n)
		copy(data[at:], nwB)
		hcB := ChecksumUpdate(hc32, at, oldB, nwB)
		if full := ^Checksum(data, 0); !same(hcB, full) {
			t.Fatalf("range at %d len %d: %#04x, full %#04x", at, n, hcB, full)
		}
	}
}

func TestIPv4DecTTL(t *testing.T) {
	h := IPv4(mustHex(t, "4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7"))
	if ttl := h.DecTTL(); ttl != 0x3f || h.TTL() != 0x3f {
		t.Fatalf("DecTTL = %d", ttl)
	}
	if !h.IsChecksumValid() || h.Checksum() != h.CalculateChecksum() {
		t.Fatalf("checksum after DecTTL %#04x, want %#04x", h.Checksum(), h.CalculateChecksum())
	}
	h.SetTTL(0)
	h.SetChecksum(h.CalculateChecksum())
	if h.DecTTL() != 0 || h.TTL() != 0 || !h.IsChecksumValid() {
		t.Fatal("DecTTL at 0 changed the header")
	}
}

var sink16 uint16

func TestChecksumAllocs(t *testing.T) {
	b := make([]byte, 1500)
	var src, dst [16]byte
	b[0] = 0x45
	u := UDP(b[:100])
	u.SetLength(100)
	allocs := testing.AllocsPerRun(100, func() {
		s := Checksum(b, 0)
		s = PseudoHeaderChecksum(ProtocolUDP, src[:], dst[:], 100) + s
		s = ChecksumUpdate16(s, 1, 2)
		s = ChecksumUpdate32(s, 1, 2)
		s = ChecksumUpdate(s, 3, b[:10], b[10:20])
		s = u.ChecksumIPv6(src, dst) + s
		sink16 = IPv4(b).CalculateChecksum() + s
	})
	if allocs != 0 {
		t.Fatalf("checksums allocate %v times per run", allocs)
	}
}

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{64, 1500, 9000} {
		data := randBytes(rand.New(rand.NewPCG(1, 1)), n)
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				_ = Checksum(data, 0)
			}
		})
	}
}
