package sdk

import (
	"testing"
	"unsafe"

	"github.com/linerate/linerate/appliance/memif"
)

// FuzzLentBuffer: a lent packet's buffer, from whatever descriptor, lies
// inside the regions and holds the packet's data after its headroom, or the
// packet is refused.
func FuzzLentBuffer(f *testing.F) {
	f.Add(uint16(0), uint32(320), uint32(64), uint32(320|1664<<16))
	f.Add(uint16(0), uint32(100), uint32(64), uint32(320))
	f.Add(uint16(1), uint32(0), uint32(1), uint32(0))
	f.Add(uint16(0), uint32(4000), uint32(0xFFFFFFFF), uint32(0xFFFF0000))
	r, err := memif.NewRegion("fuzz", 4096)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })
	spans := spansOf([]*memif.Region{r, nil})
	base := uintptr(unsafe.Pointer(&r.Mem[0]))
	f.Fuzz(func(t *testing.T, region uint16, off, length, rooms uint32) {
		d := memif.Desc{Region: region, Offset: off, Length: length, Metadata: rooms}
		addr, size, head, ok := lentBuffer(spans, d)
		if !ok {
			return
		}
		start := addr - base
		if region != 0 || addr < base || size <= 0 || start+uintptr(size) > 4096 || head+int(length) > size || start+uintptr(head) != uintptr(off) {
			t.Fatalf("desc %+v: buffer at %d, %d bytes, headroom %d", d, start, size, head)
		}
	})
}

// FuzzSpare: whatever linerate's spare ring holds, the plugin's pool takes
// only buffers inside the regions, each id once, with a headroom inside the
// buffer; a packet allocated from it stays inside its buffer.
func FuzzSpare(f *testing.F) {
	f.Add(uint16(0), uint32(0), uint32(2368), uint32(320|3<<16))
	f.Add(uint16(0), uint32(4000), uint32(2368), uint32(320))
	f.Add(uint16(1), uint32(0), uint32(64), uint32(0))
	f.Add(uint16(0), uint32(100), uint32(64), uint32(65|0xFFFF<<16))
	r, err := memif.NewRegion("fuzz-spare", 8192)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close() })
	rings, err := memif.NewRegion("fuzz-spare-ring", memif.RingBytes(4))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rings.Close() })
	ring := memif.ViewRing(rings.Mem, 4)
	regions := []*memif.Region{r}
	ep, err := newEmitPool(8, 2048)
	if err != nil {
		f.Fatal(err)
	}
	base := uintptr(unsafe.Pointer(&r.Mem[0]))
	f.Fuzz(func(t *testing.T, region uint16, off, length, word uint32) {
		ep.reset()
		var last uint16
		for k := uint16(0); k < 2; k++ { // the same descriptor twice: the id once
			*ring.D(k) = memif.Desc{Region: region, Offset: off, Length: length, Metadata: word}
		}
		ring.SetHead(2)
		ep.take(regions, ring, &last)
		ring.SetHead(0)
		ring.SetTail(0)
		if len(ep.free) > 1 {
			t.Fatalf("id %d taken %d times", word>>16, len(ep.free))
		}
		h, ok := ep.AllocOne()
		if !ok {
			return
		}
		p := h.P()
		start := uintptr(unsafe.Pointer(unsafe.SliceData(p.DataTail()))) - uintptr(p.Offset()) - base
		if region != 0 || start != uintptr(off) || start+uintptr(p.Cap()) > 8192 || p.Offset() > p.Cap() {
			t.Fatalf("desc %d/%d+%d word %#x: buffer at %d+%d, headroom %d", region, off, length, word, start, p.Cap(), p.Offset())
		}
		ep.FreeOne(h)
	})
}
