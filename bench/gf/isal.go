package main

// Intel ISA-L through cgo, for this benchmark only: the product never links
// it. Debian's libisal-dev (make deps) provides the header and library.

/*
#cgo LDFLAGS: -lisal
#include <stdlib.h>
#include <isa-l/erasure_code.h>
#include <isa-l/gf_vect_mul.h>

// The timing loops run in C, so the cgo call (tens of ns, as long as a
// 1408-byte MulAdd) is paid once per run, not once per operation.
static void isal_mad_loop(long iters, int len, unsigned char *tbl, unsigned char *src, unsigned char *dst) {
	for (long i = 0; i < iters; i++)
		gf_vect_mad(len, 1, 0, tbl, src, dst);
}

static void isal_encode_loop(long iters, int len, int k, int rows, unsigned char *tbls,
			     unsigned char **data, unsigned char **coding) {
	for (long i = 0; i < iters; i++)
		ec_encode_data(len, k, rows, tbls, data, coding);
}
*/
import "C"

import "unsafe"

// cBytes returns n bytes of 64-byte-aligned C memory, never freed: the
// buffers live as long as the program. Every implementation works on these
// same buffers, and ec_encode_data's pointer arrays may point into them
// without breaking cgo's pointer rules.
func cBytes(n int) []byte {
	p := C.aligned_alloc(64, C.size_t((n+63)&^63))
	if p == nil {
		panic("aligned_alloc failed")
	}
	b := unsafe.Slice((*byte)(p), n)
	clear(b)
	return b
}

// isalMad is gf_vect_mad with the table of gf_vect_mul_init for c.
type isalMad struct {
	tbl []byte
}

func newIsalMad(c byte) *isalMad {
	m := &isalMad{tbl: cBytes(32)}
	C.gf_vect_mul_init(C.uchar(c), (*C.uchar)(&m.tbl[0]))
	return m
}

// run computes dst ^= c·src iters times; len(src) must be ≥ 64.
func (m *isalMad) run(iters int, dst, src []byte) {
	C.isal_mad_loop(C.long(iters), C.int(len(src)), (*C.uchar)(&m.tbl[0]),
		(*C.uchar)(&src[0]), (*C.uchar)(&dst[0]))
}

// isalEncode is ec_encode_data with the tables of ec_init_tables.
type isalEncode struct {
	k, rows int
	tbls    []byte
	data    []*C.uchar // C memory
	coding  []*C.uchar // C memory
}

// newIsalEncode prepares a rows×k encode with coefficient matrix coef (row
// major) from the shards to the parity buffers, all in C memory.
func newIsalEncode(coef []byte, shards, parity [][]byte) *isalEncode {
	k, rows := len(shards), len(parity)
	e := &isalEncode{k: k, rows: rows, tbls: cBytes(32 * k * rows)}
	cc := cBytes(len(coef))
	copy(cc, coef)
	C.ec_init_tables(C.int(k), C.int(rows), (*C.uchar)(&cc[0]), (*C.uchar)(&e.tbls[0]))
	ptrs := func(bufs [][]byte) []*C.uchar {
		p := unsafe.Slice((**C.uchar)(unsafe.Pointer(&cBytes(8 * len(bufs))[0])), len(bufs))
		for i, b := range bufs {
			p[i] = (*C.uchar)(&b[0])
		}
		return p
	}
	e.data, e.coding = ptrs(shards), ptrs(parity)
	return e
}

func (e *isalEncode) run(iters, size int) {
	C.isal_encode_loop(C.long(iters), C.int(size), C.int(e.k), C.int(e.rows),
		(*C.uchar)(&e.tbls[0]), &e.data[0], &e.coding[0])
}
