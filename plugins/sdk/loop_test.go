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
	regions := []*memif.Region{r}
	base := uintptr(unsafe.Pointer(&r.Mem[0]))
	f.Fuzz(func(t *testing.T, region uint16, off, length, rooms uint32) {
		d := memif.Desc{Region: region, Offset: off, Length: length, Metadata: rooms}
		buf, head, ok := lentBuffer(regions, d)
		if !ok {
			return
		}
		start := uintptr(unsafe.Pointer(unsafe.SliceData(buf))) - base
		if region != 0 || start+uintptr(len(buf)) > 4096 || head+int(length) > len(buf) || start+uintptr(head) != uintptr(off) {
			t.Fatalf("desc %+v: buffer at %d, %d bytes, headroom %d", d, start, len(buf), head)
		}
	})
}
