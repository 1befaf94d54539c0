package external

import (
	"testing"
)

// FuzzWindow: whatever a plugin writes in a result descriptor, the window
// the host takes lies inside the packet's own buffer, or the result is
// refused.
func FuzzWindow(f *testing.F) {
	f.Add(uint16(1), uint32(4096+320), uint32(64), uint16(1), uint64(4096), 2368)
	f.Add(uint16(1), uint32(4095), uint32(64), uint16(1), uint64(4096), 2368)
	f.Add(uint16(2), uint32(4096), uint32(1), uint16(1), uint64(4096), 2368)
	f.Add(uint16(1), uint32(0xFFFFFFFF), uint32(0xFFFFFFFF), uint16(1), uint64(0), 2368)
	f.Fuzz(func(t *testing.T, dregion uint16, doff, dlen uint32, region uint16, start uint64, capacity int) {
		if capacity < 0 || start > 1<<40 {
			return
		}
		off, length, ok := window(dregion, doff, dlen, region, start, capacity)
		if !ok {
			return
		}
		if dregion != region || off < 0 || length < 0 || off+length > capacity ||
			start+uint64(off) != uint64(doff) || length != int(dlen) {
			t.Fatalf("desc %d/%d+%d, buffer %d at %d+%d: window %d+%d", dregion, doff, dlen, region, start, capacity, off, length)
		}
	})
}
