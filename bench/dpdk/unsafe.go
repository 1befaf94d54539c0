//go:build dpdk

package main

import "unsafe"

func ptr(d []byte, off int) unsafe.Pointer { return unsafe.Pointer(&d[off]) }
