package packet

import (
	"syscall"
	"unsafe"
)

// memfd_create(2) and the seals, through syscall alone: the stage contract
// depends on nothing outside the standard library.
const (
	mfdCloexec      = 0x1
	mfdAllowSealing = 0x2
	fAddSeals       = 1033
	fSealSeal       = 0x1
	fSealShrink     = 0x2
	fSealGrow       = 0x4
	sysMemfdCreate  = 319 // amd64; package syscall has no name for it
)

func memfdCreate(name string) (int, error) {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return -1, err
	}
	fd, _, errno := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(p)), mfdCloexec|mfdAllowSealing, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func sealAll(fd int) error {
	_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fAddSeals, fSealShrink|fSealGrow|fSealSeal)
	if errno != 0 {
		return errno
	}
	return nil
}
