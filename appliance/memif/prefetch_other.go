//go:build !amd64

package memif

// prefetchw is a hint: nothing where it has no instruction here.
func prefetchw(uintptr, int) {}
