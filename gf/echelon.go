package gf

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unsafe"
)

// Echelon is a progressive Gauss–Jordan decoder over GF(2^8): it holds up to
// K rows, each a coefficient vector of K bytes and a payload of N bytes,
// kept in reduced row-echelon form as they arrive.
//
// Insert reduces a new coefficient vector against the rows held, O(rank·K)
// on the coefficients alone, and only when the vector turns out to be
// innovative (independent of the rows held) touches payloads: one fused pass
// (MulMulti) that builds the new row's payload from the caller's payload and
// the held rows it was reduced by, then one pass (MulAddMulti, one source,
// many destinations) that clears the new pivot column from the other rows. A
// non-innovative packet costs no payload work at all.
//
// Because the form is reduced, source block i is decoded as soon as the row
// with pivot i has no other nonzero coefficient, before the rank is full
// (Decoded); at full rank every block is. Any row held is a valid coded
// packet of the same generation, which is what a recoder combines (Row).
//
// The coefficient pass works on every row held, whatever its factor (a zero
// factor adds nothing), so that the rows it reads or updates are always the
// first Rank slots: no per-insert list of rows, only a gather of factors,
// and the kernels are called directly, the lengths being known. Rows of at
// most one vector (K ≤ 64: coefficient vectors, or the short augmented rows
// of a decoder that keeps payloads elsewhere) are laid out one per aligned
// 64-octet line, so that each is a single vector. Payload passes take only
// the rows with a non-zero factor: there a row costs N octets.
//
// An Echelon is not safe for concurrent use. Insert, Decoded, Row, Pivot and
// Reset allocate nothing.
type Echelon struct {
	k, n    int
	stride  int // octets from one coefficient row to the next
	rank    int
	coef    []byte   // K rows of stride octets: slot s is the row inserted s-th
	payload []byte   // K×N: the payload of slot s
	pivotOf []int32  // slot → its pivot column
	slotOf  []int32  // column → slot whose pivot it is, or -1
	rows    [][]byte // slot → its coefficient row, K octets

	// Scratch for the kernels, sized at construction so Insert allocates
	// nothing: the new vector, per-row factors, and the payload rows and
	// factors of a payload pass.
	vec         []byte
	factors     []byte
	one         [][]byte
	payloadRows [][]byte
	payFactors  []byte
}

// NewEchelon returns an empty decoder for generations of k source blocks of
// payloadLen bytes each. payloadLen may be 0 to track coefficients only.
func NewEchelon(k, payloadLen int) (*Echelon, error) {
	if k <= 0 || payloadLen < 0 {
		return nil, fmt.Errorf("gf: NewEchelon(%d, %d): need k > 0 and payloadLen ≥ 0", k, payloadLen)
	}
	stride := k
	if k <= lineLen {
		stride = lineLen
	}
	e := &Echelon{
		k:           k,
		n:           payloadLen,
		stride:      stride,
		coef:        alignedLines(k * stride),
		payload:     make([]byte, k*payloadLen),
		pivotOf:     make([]int32, k),
		slotOf:      make([]int32, k),
		rows:        make([][]byte, k),
		vec:         alignedLines(stride),
		factors:     make([]byte, k),
		one:         make([][]byte, 1),
		payloadRows: make([][]byte, 0, k+1),
		payFactors:  make([]byte, 0, k+1),
	}
	for s := range e.rows {
		e.rows[s] = e.coef[s*stride : s*stride+k : s*stride+k]
	}
	e.Reset()
	return e, nil
}

// lineLen is a cache line and an AVX-512 vector.
const lineLen = 64

// alignedLines returns n zeroed octets starting on a cache line, so that a
// row of at most lineLen octets is one aligned vector.
func alignedLines(n int) []byte {
	b := make([]byte, n+lineLen-1)
	off := -int(uintptr(unsafe.Pointer(&b[0]))) & (lineLen - 1)
	return b[off : off+n : off+n]
}

// Reset empties e for the next generation, keeping its storage.
func (e *Echelon) Reset() {
	e.rank = 0
	for i := range e.slotOf {
		e.slotOf[i] = -1
	}
}

// K returns the number of source blocks per generation.
func (e *Echelon) K() int { return e.k }

// PayloadLen returns the payload length of a row.
func (e *Echelon) PayloadLen() int { return e.n }

// Rank returns the number of independent rows held.
func (e *Echelon) Rank() int { return e.rank }

// Full reports whether the rank is K, so every source block is decoded.
func (e *Echelon) Full() bool { return e.rank == e.k }

// Insert adds a coded packet: coeffs, its K coefficients, and payload, at
// most PayloadLen bytes (a shorter payload is taken as zero-padded). It
// reports whether the packet was innovative; if not, e is unchanged and no
// payload byte was read. Neither slice is retained.
func (e *Echelon) Insert(coeffs, payload []byte) (innovative bool, err error) {
	if len(coeffs) != e.k {
		return false, fmt.Errorf("gf: Echelon.Insert: %d coefficients, want %d", len(coeffs), e.k)
	}
	if len(payload) > e.n {
		return false, fmt.Errorf("gf: Echelon.Insert: payload of %d bytes, at most %d", len(payload), e.n)
	}
	if e.rank == e.k {
		return false, nil
	}

	// Reduce the coefficients against every row held. In reduced form a
	// row's pivot column is zero in every other row, so the factor of row s
	// is the incoming coefficient at its pivot, known before any
	// subtraction: the reduction is one fused dot product.
	k, l, rank := e.k, CurrentLevel(), e.rank
	v := e.vec[:k:k]
	copy(v, coeffs)
	f := e.factors[:rank:rank]
	for s := range f {
		f[s] = coeffs[e.pivotOf[s]]
	}
	if rank > 0 {
		e.one[0] = v
		dotRegion(l, e.one, e.rows[:rank], f, k, true)
	}
	q := firstNonZero(v)
	if q < 0 {
		return false, nil
	}

	// Innovative: it becomes slot rank, scaled so its pivot is 1. The
	// payload is inv·(payload + Σ f·held), in one fused pass with inv folded
	// into the factors.
	inv := Inv8(v[q])
	row := e.rows[rank]
	mulRegion(l, row, v, inv)
	if e.n > 0 {
		e.insertPayload(payload, f, inv)
	}

	// Back-substitute: clear column q from every other row, in one pass of
	// the new row over the coefficients (the factors are the len×1 matrix of
	// a single source), then one over the payloads.
	if rank > 0 {
		for s, at := 0, q; s < rank; s, at = s+1, at+e.stride {
			f[s] = e.coef[at]
		}
		e.one[0] = row
		dotRegion(l, e.rows[:rank], e.one, f, k, true)
		if e.n > 0 {
			e.backPayload(f)
		}
	}
	e.pivotOf[rank] = int32(q)
	e.slotOf[q] = int32(rank)
	e.rank++
	return true, nil
}

// insertPayload writes the payload of the new row, slot Rank: inv·(payload +
// Σ f[s]·held s) over the held rows with a non-zero factor.
func (e *Echelon) insertPayload(payload, f []byte, inv byte) {
	srcs, pf := e.payloadRows[:1], e.payFactors[:1]
	srcs[0], pf[0] = payload, inv
	for s, c := range f {
		if c != 0 {
			srcs = append(srcs, e.payloadRow(s))
			pf = append(pf, Mul8(c, inv))
		}
	}
	dst := e.payloadRow(e.rank)
	e.one[0] = dst[:len(payload)]
	MulMulti(e.one, srcs, pf)
	if len(payload) < e.n {
		// Past the caller's payload only the held rows contribute.
		e.one[0] = dst[len(payload):]
		for i := 1; i < len(srcs); i++ {
			srcs[i] = srcs[i][len(payload):]
		}
		MulMulti(e.one, srcs[1:], pf[1:])
	}
}

// backPayload clears the new row's payload, times f[s], from every held row
// s with a non-zero factor.
func (e *Echelon) backPayload(f []byte) {
	dsts, pf := e.payloadRows[:0], e.payFactors[:0]
	for s, c := range f {
		if c != 0 {
			dsts = append(dsts, e.payloadRow(s))
			pf = append(pf, c)
		}
	}
	e.one[0] = e.payloadRow(e.rank)
	MulAddMulti(dsts, e.one, pf)
}

// firstNonZero is the index of v's first non-zero octet, or -1: eight at a
// time, as the scan runs once per Insert.
func firstNonZero(v []byte) int {
	i := 0
	for ; i+8 <= len(v); i += 8 {
		if w := binary.LittleEndian.Uint64(v[i:]); w != 0 {
			return i + bits.TrailingZeros64(w)/8
		}
	}
	for ; i < len(v); i++ {
		if v[i] != 0 {
			return i
		}
	}
	return -1
}

// Decoded returns source block i if it is decoded: the row with pivot i has
// no other nonzero coefficient. The slice is e's storage, valid until the
// next Insert or Reset.
func (e *Echelon) Decoded(i int) (block []byte, ok bool) {
	if i < 0 || i >= e.k {
		return nil, false
	}
	s := e.slotOf[i]
	if s < 0 {
		return nil, false
	}
	if e.rank < e.k {
		for j, c := range e.row(int(s)) {
			if c != 0 && j != i {
				return nil, false
			}
		}
	}
	return e.payloadRow(int(s)), true
}

// Row returns row s (s < Rank) as a coded packet: its coefficients and
// payload, e's storage, valid until the next Insert or Reset. Rows are in
// insertion order of the innovative packets, not pivot order.
func (e *Echelon) Row(s int) (coeffs, payload []byte) {
	if s < 0 || s >= e.rank {
		return nil, nil
	}
	return e.row(s), e.payloadRow(s)
}

// Pivot returns the pivot column of row s (s < Rank): its first non-zero
// coefficient, which is 1. It is -1 for s out of range.
func (e *Echelon) Pivot(s int) int {
	if s < 0 || s >= e.rank {
		return -1
	}
	return int(e.pivotOf[s])
}

// Touch reads a word of every cache line the next Insert's coefficient pass
// reads (the rows held, their slice headers and pivots) and returns a value
// that means nothing. A caller with many Echelons, more than stay in cache,
// touches the ones its next packets will need before inserting any: their
// cache misses then overlap instead of coming one after the other.
func (e *Echelon) Touch() uint64 {
	var x uint64
	n := e.rank * e.stride
	for o := 0; o < n; o += lineLen {
		x += uint64(e.coef[o])
	}
	for s := 0; s < e.rank; s += 2 {
		x += uint64(len(e.rows[s]))
	}
	for s := 0; s < e.rank; s += 16 {
		x += uint64(e.pivotOf[s])
	}
	return x + uint64(e.vec[0]) + uint64(e.factors[0])
}

func (e *Echelon) row(s int) []byte { return e.rows[s] }

func (e *Echelon) payloadRow(s int) []byte {
	return e.payload[s*e.n : (s+1)*e.n : (s+1)*e.n]
}
