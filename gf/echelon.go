package gf

import "fmt"

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
// An Echelon is not safe for concurrent use. Insert, Decoded, Row and Reset
// allocate nothing.
type Echelon struct {
	k, n    int
	rank    int
	coef    []byte  // K×K: slot s is the row inserted s-th
	payload []byte  // K×N: the payload of slot s
	pivotOf []int32 // slot → its pivot column
	slotOf  []int32 // column → slot whose pivot it is, or -1

	// Scratch for the fused kernels, sized at construction so Insert
	// allocates nothing: the rows a new vector is reduced by (coefficient
	// and payload parts), the rows back-substitution updates, and factors.
	vec         []byte
	coefRows    [][]byte
	payloadRows [][]byte
	one         [][]byte
	factors     []byte
}

// NewEchelon returns an empty decoder for generations of k source blocks of
// payloadLen bytes each. payloadLen may be 0 to track coefficients only.
func NewEchelon(k, payloadLen int) (*Echelon, error) {
	if k <= 0 || payloadLen < 0 {
		return nil, fmt.Errorf("gf: NewEchelon(%d, %d): need k > 0 and payloadLen ≥ 0", k, payloadLen)
	}
	e := &Echelon{
		k:           k,
		n:           payloadLen,
		coef:        make([]byte, k*k),
		payload:     make([]byte, k*payloadLen),
		pivotOf:     make([]int32, k),
		slotOf:      make([]int32, k),
		vec:         make([]byte, k),
		coefRows:    make([][]byte, 0, k),
		payloadRows: make([][]byte, 0, k+1),
		one:         make([][]byte, 1),
		factors:     make([]byte, 0, k+1),
	}
	e.Reset()
	return e, nil
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
	v := e.vec
	copy(v, coeffs)
	e.coefRows, e.payloadRows = e.coefRows[:0], e.payloadRows[:1] // [0] is for payload
	e.factors = e.factors[:1]
	for s := 0; s < e.rank; s++ {
		if f := coeffs[e.pivotOf[s]]; f != 0 {
			e.coefRows = append(e.coefRows, e.row(s))
			e.payloadRows = append(e.payloadRows, e.payloadRow(s))
			e.factors = append(e.factors, f)
		}
	}
	e.one[0] = v
	MulAddMulti(e.one, e.coefRows, e.factors[1:])
	q := -1
	for j, c := range v {
		if c != 0 {
			q = j
			break
		}
	}
	if q < 0 {
		return false, nil
	}

	// Innovative: it becomes slot e.rank, scaled so its pivot is 1. The
	// payload is inv·(payload + Σ f·held), in one fused pass with inv folded
	// into the factors.
	slot := e.rank
	inv := Inv8(v[q])
	row := e.row(slot)
	Mul(row, v, inv)
	if e.n > 0 {
		f := e.factors
		f[0] = inv
		for i := 1; i < len(f); i++ {
			f[i] = Mul8(f[i], inv)
		}
		dst := e.payloadRow(slot)
		srcs := e.payloadRows
		srcs[0] = payload
		e.one[0] = dst[:len(payload)]
		MulMulti(e.one, srcs, f)
		if len(payload) < e.n {
			// Past the caller's payload only the held rows contribute.
			e.one[0] = dst[len(payload):]
			for i := 1; i < len(srcs); i++ {
				srcs[i] = srcs[i][len(payload):]
			}
			MulMulti(e.one, srcs[1:], f[1:])
		}
	}

	// Back-substitute: clear column q from every other row, in one pass of
	// the new row over the coefficients, then one over the payloads.
	e.coefRows, e.payloadRows, e.factors = e.coefRows[:0], e.payloadRows[:0], e.factors[:0]
	for s := 0; s < e.rank; s++ {
		if f := e.coef[s*e.k+q]; f != 0 {
			e.coefRows = append(e.coefRows, e.row(s))
			e.payloadRows = append(e.payloadRows, e.payloadRow(s))
			e.factors = append(e.factors, f)
		}
	}
	if len(e.factors) > 0 {
		// factors is the len×1 matrix of a single source.
		e.one[0] = row
		MulAddMulti(e.coefRows, e.one, e.factors)
		if e.n > 0 {
			e.one[0] = e.payloadRow(slot)
			MulAddMulti(e.payloadRows, e.one, e.factors)
		}
	}
	e.pivotOf[slot] = int32(q)
	e.slotOf[q] = int32(slot)
	e.rank++
	return true, nil
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

func (e *Echelon) row(s int) []byte { return e.coef[s*e.k : (s+1)*e.k : (s+1)*e.k] }

func (e *Echelon) payloadRow(s int) []byte {
	return e.payload[s*e.n : (s+1)*e.n : (s+1)*e.n]
}
