package gf

import (
	"errors"
	"fmt"
)

// Matrices over GF(2^8): Gauss–Jordan elimination, inversion, rank, and
// Echelon, the incremental row-echelon form that progressive RLNC decoding
// and recoding are built on. Row operations run on the region kernels.

// ErrSingular is returned when a matrix that must be invertible is not.
var ErrSingular = errors.New("gf: singular matrix")

// Matrix is a dense matrix over GF(2^8), stored row by row.
type Matrix struct {
	rows, cols int
	data       []byte
}

// NewMatrix returns a zero rows×cols matrix. Negative sizes are a programming
// error and panic, as make does.
func NewMatrix(rows, cols int) *Matrix {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("gf: NewMatrix(%d, %d): negative size", rows, cols))
	}
	return &Matrix{rows: rows, cols: cols, data: make([]byte, rows*cols)}
}

// MatrixFrom returns the rows×cols matrix whose rows are consecutive in data,
// which it uses without copying.
func MatrixFrom(rows, cols int, data []byte) (*Matrix, error) {
	if rows < 0 || cols < 0 || len(data) != rows*cols {
		return nil, fmt.Errorf("gf: MatrixFrom: %d bytes for a %d×%d matrix", len(data), rows, cols)
	}
	return &Matrix{rows: rows, cols: cols, data: data}, nil
}

// Identity returns the n×n identity matrix.
func Identity(n int) *Matrix {
	m := NewMatrix(n, n)
	for i := 0; i < n; i++ {
		m.data[i*n+i] = 1
	}
	return m
}

// Vandermonde returns the rows×cols matrix with entry (i, j) = i^j, where row
// i is the field element i (0^0 = 1). Any cols rows of it are independent, so
// rows ≤ 256.
func Vandermonde(rows, cols int) (*Matrix, error) {
	if rows > 256 {
		return nil, fmt.Errorf("gf: Vandermonde: %d rows, at most 256 distinct elements", rows)
	}
	m := NewMatrix(rows, cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			m.data[i*cols+j] = Pow8(byte(i), j)
		}
	}
	return m, nil
}

// Cauchy returns the rows×cols Cauchy matrix with entry (i, j) =
// 1/((cols+i) ⊕ j), ISA-L's gf_gen_cauchy1_matrix below its identity part:
// every square submatrix is invertible. It needs rows+cols ≤ 256.
func Cauchy(rows, cols int) (*Matrix, error) {
	if rows+cols > 256 {
		return nil, fmt.Errorf("gf: Cauchy: %d+%d rows and columns, at most 256", rows, cols)
	}
	m := NewMatrix(rows, cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			m.data[i*cols+j] = Inv8(byte(cols+i) ^ byte(j))
		}
	}
	return m, nil
}

// Rows returns the number of rows.
func (m *Matrix) Rows() int { return m.rows }

// Cols returns the number of columns.
func (m *Matrix) Cols() int { return m.cols }

// At returns entry (i, j).
func (m *Matrix) At(i, j int) byte { return m.data[i*m.cols+j] }

// Set sets entry (i, j) to v.
func (m *Matrix) Set(i, j int, v byte) { m.data[i*m.cols+j] = v }

// Row returns row i, sharing its storage.
func (m *Matrix) Row(i int) []byte { return m.data[i*m.cols : (i+1)*m.cols : (i+1)*m.cols] }

// Data returns the entries row by row, sharing their storage.
func (m *Matrix) Data() []byte { return m.data }

// Clone returns a copy of m.
func (m *Matrix) Clone() *Matrix {
	return &Matrix{rows: m.rows, cols: m.cols, data: append([]byte(nil), m.data...)}
}

// Equal reports whether m and o have the same shape and entries.
func (m *Matrix) Equal(o *Matrix) bool {
	if m.rows != o.rows || m.cols != o.cols {
		return false
	}
	for i, v := range m.data {
		if o.data[i] != v {
			return false
		}
	}
	return true
}

// String formats m in hex, one row a line.
func (m *Matrix) String() string {
	s := fmt.Sprintf("%d×%d", m.rows, m.cols)
	for i := 0; i < m.rows; i++ {
		s += fmt.Sprintf("\n% x", m.Row(i))
	}
	return s
}

// Mul returns the product m·o.
func (m *Matrix) Mul(o *Matrix) (*Matrix, error) {
	if m.cols != o.rows {
		return nil, fmt.Errorf("gf: Matrix.Mul: %d×%d times %d×%d", m.rows, m.cols, o.rows, o.cols)
	}
	p := NewMatrix(m.rows, o.cols)
	for i := 0; i < m.rows; i++ {
		dst := p.Row(i)
		for k, c := range m.Row(i) {
			MulAdd(dst, o.Row(k), c)
		}
	}
	return p, nil
}

// Transpose returns the transpose of m.
func (m *Matrix) Transpose() *Matrix {
	t := NewMatrix(m.cols, m.rows)
	for i := 0; i < m.rows; i++ {
		for j := 0; j < m.cols; j++ {
			t.data[j*m.rows+i] = m.data[i*m.cols+j]
		}
	}
	return t
}

// GaussJordan brings m, in place, to reduced row-echelon form: each nonzero
// row starts with a 1 (its pivot), in a column that is zero in every other
// row, and the pivots move right row by row; zero rows come last. It returns
// the rank.
func (m *Matrix) GaussJordan() (rank int) {
	return m.reduce(m.cols)
}

// reduce is GaussJordan choosing pivots among the first pivotCols columns
// only (Invert pivots on the left half of [A | I]).
func (m *Matrix) reduce(pivotCols int) int {
	r := 0
	for c := 0; c < pivotCols && r < m.rows; c++ {
		p := -1
		for i := r; i < m.rows; i++ {
			if m.data[i*m.cols+c] != 0 {
				p = i
				break
			}
		}
		if p < 0 {
			continue
		}
		pr := m.Row(p)
		if p != r {
			rr := m.Row(r)
			for j := range rr {
				rr[j], pr[j] = pr[j], rr[j]
			}
			pr = rr
		}
		if v := pr[c]; v != 1 {
			Mul(pr[c:], pr[c:], Inv8(v)) // columns left of c are zero
		}
		for i := 0; i < m.rows; i++ {
			if i == r {
				continue
			}
			row := m.Row(i)
			if f := row[c]; f != 0 {
				MulAdd(row[c:], pr[c:], f)
			}
		}
		r++
	}
	return r
}

// Rank returns the rank of m, leaving m unchanged.
func (m *Matrix) Rank() int {
	return m.Clone().GaussJordan()
}

// Invert returns the inverse of the square matrix m, leaving m unchanged, or
// ErrSingular.
func (m *Matrix) Invert() (*Matrix, error) {
	if m.rows != m.cols {
		return nil, fmt.Errorf("gf: Matrix.Invert: %d×%d is not square", m.rows, m.cols)
	}
	n := m.rows
	aug := NewMatrix(n, 2*n)
	for i := 0; i < n; i++ {
		copy(aug.data[i*2*n:], m.Row(i))
		aug.data[i*2*n+n+i] = 1
	}
	if aug.reduce(n) < n {
		return nil, ErrSingular
	}
	inv := NewMatrix(n, n)
	for i := 0; i < n; i++ {
		copy(inv.Row(i), aug.data[i*2*n+n:(i+1)*2*n])
	}
	return inv, nil
}
