package memif

import (
	"testing"
	"unsafe"
)

// TestLineSpans: the lines PrepareWrite prefetches are exactly those of the
// slots asked for, wrapped round the ring's end, and never outside its
// descriptors, whatever the slot, the count (more than the ring included)
// and the ring's size.
func TestLineSpans(t *testing.T) {
	for log2 := uint8(0); log2 <= 6; log2++ {
		mem := make([]byte, RingBytes(log2))
		r := ViewRing(mem, log2)
		area := uintptr(r.Size()) * DescSize
		for slot := 0; slot < 3*int(r.Size()); slot++ {
			for n := 0; n <= int(r.Size())+3; n++ {
				want := map[uintptr]bool{} // lines of the slots, by offset
				for k := 0; k < min(n, int(r.Size())); k++ {
					want[uintptr(uint16(slot+k)&r.Mask())*DescSize&^63] = true
				}
				got := map[uintptr]bool{}
				for _, sp := range r.lineSpans(uint16(slot), uint16(n)) {
					for l := 0; l < sp.lines; l++ {
						off := sp.off + uintptr(l)*64
						if off%64 != 0 || off >= area || got[off] {
							t.Fatalf("ring of %d, slots %d+%d: line at %d (area %d, twice %v)", r.Size(), slot, n, off, area, got[off])
						}
						got[off] = true
					}
				}
				if len(got) != len(want) {
					t.Fatalf("ring of %d, slots %d+%d: %d lines, want %d", r.Size(), slot, n, len(got), len(want))
				}
				for off := range want {
					if !got[off] {
						t.Fatalf("ring of %d, slots %d+%d: line at %d missing", r.Size(), slot, n, off)
					}
				}
			}
		}
		if uintptr(unsafe.Pointer(r.D(0)))-uintptr(unsafe.Pointer(&mem[0])) != RingHdrSize {
			t.Fatal("descriptors do not start after the header")
		}
	}
}

// TestPrepareWriteTouch: the hints change nothing in the ring, and Touch
// reads what the slots hold.
func TestPrepareWriteTouch(t *testing.T) {
	mem := make([]byte, RingBytes(4))
	r := ViewRing(mem, 4)
	for s := uint16(0); s < r.Size(); s++ {
		*r.D(s) = Desc{Region: s, Offset: uint32(s) * 7, Length: 60, Metadata: uint32(s) << 8}
	}
	before := string(mem)
	for s := uint16(0); s < 40; s++ {
		r.PrepareWrite(s, 64)
		r.PrepareWrite(s, s)
	}
	if string(mem) != before {
		t.Fatal("PrepareWrite changed the ring")
	}
	// Slots 14, 15, 0, 1 (wrapped): lines of slots 14 and 0 read (slot 0's
	// metadata is 0), and the last, 1.
	if got, want := r.Touch(14, 4), uint32(14<<8^1<<8); got != want {
		t.Fatalf("Touch: %#x, want %#x", got, want)
	}
	if r.Touch(3, 0) != 0 {
		t.Fatal("Touch of no slots read something")
	}
}
