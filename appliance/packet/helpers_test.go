package packet

import (
	"testing"
	"unsafe"
)

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// newTestSlab makes a slab pool of n buffers that the test closes, checking that
// every buffer came back.
func newTestSlab(t testing.TB, n int) *Slab {
	t.Helper()
	s, err := NewSlab(SlabConfig{Name: t.Name(), Buffers: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close pool: %v", err)
		}
	})
	return s
}
