package gf

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func randMatrix(rng *rand.Rand, rows, cols int) *Matrix {
	m := NewMatrix(rows, cols)
	for i := range m.data {
		m.data[i] = byte(rng.Uint32())
	}
	return m
}

// checkInverse checks a·inv = inv·a = I.
func checkInverse(t testing.TB, what string, a, inv *Matrix) {
	t.Helper()
	id := Identity(a.Rows())
	for _, p := range [][2]*Matrix{{a, inv}, {inv, a}} {
		prod, err := p[0].Mul(p[1])
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !prod.Equal(id) {
			t.Fatalf("%s: product with the inverse is not I:\n%v", what, prod)
		}
	}
}

// checkRREF checks that m is in reduced row-echelon form with the given rank.
func checkRREF(t testing.TB, what string, m *Matrix, rank int) {
	t.Helper()
	last := -1
	for i := 0; i < m.Rows(); i++ {
		row := m.Row(i)
		p := -1
		for j, v := range row {
			if v != 0 {
				p = j
				break
			}
		}
		if i >= rank {
			if p >= 0 {
				t.Fatalf("%s: row %d is nonzero beyond the rank %d", what, i, rank)
			}
			continue
		}
		if p <= last || row[p] != 1 {
			t.Fatalf("%s: row %d: pivot at %d (previous %d) is %#x", what, i, p, last, row[p])
		}
		for k := 0; k < m.Rows(); k++ {
			if k != i && m.At(k, p) != 0 {
				t.Fatalf("%s: pivot column %d is nonzero in row %d", what, p, k)
			}
		}
		last = p
	}
}

func TestInvertRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for n := 1; n <= 48; n++ {
		for try := 0; try < 4; try++ {
			a := randMatrix(rng, n, n)
			orig := a.Clone()
			inv, err := a.Invert()
			if !a.Equal(orig) {
				t.Fatal("Invert changed its operand")
			}
			if errors.Is(err, ErrSingular) {
				if r := a.Rank(); r == n {
					t.Fatalf("n=%d: ErrSingular for a matrix of full rank", n)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			checkInverse(t, fmt.Sprintf("random n=%d", n), a, inv)
			if a.Rank() != n {
				t.Fatalf("n=%d: invertible but Rank = %d", n, a.Rank())
			}
		}
	}
	for _, n := range []int{1, 2, 8, 32, 100, 128} {
		c, err := Cauchy(n, n)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := c.Invert()
		if err != nil {
			t.Fatalf("Cauchy %d×%d: %v", n, n, err)
		}
		checkInverse(t, fmt.Sprintf("Cauchy n=%d", n), c, inv)
	}
	for _, n := range []int{1, 2, 16, 64, 255, 256} {
		v, err := Vandermonde(n, n)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := v.Invert()
		if err != nil {
			t.Fatalf("Vandermonde %d×%d: %v", n, n, err)
		}
		checkInverse(t, fmt.Sprintf("Vandermonde n=%d", n), v, inv)
	}
	// A systematic generator's square submatrices are invertible: the RS
	// property that Cauchy(m, k) below Identity(k) gives.
	c, _ := Cauchy(4, 32)
	for i := 0; i < 4; i++ {
		sub := NewMatrix(4, 4)
		for r := 0; r < 4; r++ {
			for j := 0; j < 4; j++ {
				sub.Set(r, j, c.At(r, (i*5+j*7)%32))
			}
		}
		if sub.Rank() != 4 {
			t.Errorf("Cauchy submatrix %d singular", i)
		}
	}
}

func TestSingular(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 2))
	cases := map[string]*Matrix{"zero": NewMatrix(5, 5)}
	dup := randMatrix(rng, 6, 6)
	copy(dup.Row(4), dup.Row(1))
	cases["duplicate row"] = dup
	comb := randMatrix(rng, 7, 7)
	for j := range comb.Row(6) {
		comb.Row(6)[j] = Mul8(3, comb.At(0, j)) ^ Mul8(0x8E, comb.At(2, j)) ^ comb.At(5, j)
	}
	cases["row a combination of others"] = comb
	col := randMatrix(rng, 9, 9)
	for i := 0; i < 9; i++ {
		col.Set(i, 8, Mul8(7, col.At(i, 3)))
	}
	cases["column a multiple of another"] = col
	for name, m := range cases {
		if _, err := m.Invert(); !errors.Is(err, ErrSingular) {
			t.Errorf("%s: Invert err = %v, want ErrSingular", name, err)
		}
	}
	if _, err := NewMatrix(2, 3).Invert(); err == nil || errors.Is(err, ErrSingular) {
		t.Errorf("non-square Invert: err = %v", err)
	}
}

func TestRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 3))
	for _, sz := range [][3]int{{5, 5, 0}, {10, 10, 3}, {20, 12, 12}, {12, 20, 7}, {40, 40, 39}, {33, 17, 1}} {
		rows, cols, r := sz[0], sz[1], sz[2]
		// B (rows×r) · C (r×cols) has rank at most r; a fixed seed makes
		// it exactly r, which the RREF then shows independently.
		var m *Matrix
		if r == 0 {
			m = NewMatrix(rows, cols)
		} else {
			var err error
			m, err = randMatrix(rng, rows, r).Mul(randMatrix(rng, r, cols))
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := m.Rank(); got != r {
			t.Errorf("%d×%d of rank %d: Rank = %d", rows, cols, r, got)
		}
		if got := m.Transpose().Rank(); got != r {
			t.Errorf("%d×%d of rank %d: Rank of transpose = %d", rows, cols, r, got)
		}
		red := m.Clone()
		checkRREF(t, fmt.Sprintf("%d×%d rank %d", rows, cols, r), red, red.GaussJordan())
	}
	if _, err := NewMatrix(2, 3).Mul(NewMatrix(2, 3)); err == nil {
		t.Error("Mul of mismatched shapes succeeded")
	}
	if _, err := MatrixFrom(2, 3, make([]byte, 5)); err == nil {
		t.Error("MatrixFrom with the wrong length succeeded")
	}
	if _, err := Cauchy(200, 57); err == nil {
		t.Error("Cauchy beyond 256 succeeded")
	}
}

// generation is K random source blocks and a way to code them.
type generation struct {
	src [][]byte
}

func newGeneration(rng *rand.Rand, k, n int) *generation {
	g := &generation{}
	for i := 0; i < k; i++ {
		g.src = append(g.src, randWide(rng, n))
	}
	return g
}

// code returns the payload Σ coeffs[i]·src[i], computed by the scalar
// definition.
func (g *generation) code(coeffs []byte) []byte {
	if len(g.src) == 0 {
		return nil
	}
	p := make([]byte, len(g.src[0]))
	for i, c := range coeffs {
		for x, s := range g.src[i] {
			p[x] ^= Mul8(c, s)
		}
	}
	return p
}

// checkEchelon checks e's invariants: rows in reduced form (pivot 1, pivot
// columns clear elsewhere), each row's payload the coding of its
// coefficients, and every decoded block the source.
func checkEchelon(t testing.TB, what string, e *Echelon, g *generation) {
	t.Helper()
	for s := 0; s < e.Rank(); s++ {
		co, pl := e.Row(s)
		q := e.pivotOf[s]
		if co[q] != 1 || e.slotOf[q] != int32(s) {
			t.Fatalf("%s: row %d: pivot column %d holds %#x", what, s, q, co[q])
		}
		if p := e.Pivot(s); p != int(q) {
			t.Fatalf("%s: Pivot(%d) = %d, want %d", what, s, p, q)
		}
		for j := 0; j < int(q); j++ {
			if co[j] != 0 {
				t.Fatalf("%s: row %d has %#x in column %d, before its pivot %d", what, s, co[j], j, q)
			}
		}
		for o := 0; o < e.Rank(); o++ {
			if o != s && e.row(o)[q] != 0 {
				t.Fatalf("%s: pivot column %d of row %d is nonzero in row %d", what, q, s, o)
			}
		}
		if g != nil && !bytes.Equal(pl, g.code(co)) {
			t.Fatalf("%s: row %d: payload is not the coding of its coefficients", what, s)
		}
	}
	for i := 0; i < e.K(); i++ {
		b, ok := e.Decoded(i)
		if ok && g != nil && !bytes.Equal(b, g.src[i]) {
			t.Fatalf("%s: Decoded(%d) is not source block %d", what, i, i)
		}
		if e.Full() && !ok {
			t.Fatalf("%s: full rank but block %d not decoded", what, i)
		}
	}
}

func TestEchelonMatchesBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 4))
	for _, kn := range [][2]int{{1, 10}, {4, 0}, {8, 64}, {16, 1408}, {32, 1408}, {32, 100}, {50, 33}} {
		echelonMatchesBatch(t, rng, kn[0], kn[1])
	}
}

// TestEchelonLevels runs the batch comparison at every level, on rows of one
// vector or less (K ≤ 64, laid out one per line), K just past it, and the
// short coefficient-only rows of the rlnc decoder (2K+8 columns).
func TestEchelonLevels(t *testing.T) {
	forLevels(t, func(l Level) {
		rng := rand.New(rand.NewPCG(8, uint64(l)))
		for _, kn := range [][2]int{{3, 0}, {40, 0}, {64, 0}, {65, 0}, {20, 70}, {7, 130}} {
			echelonMatchesBatch(t, rng, kn[0], kn[1])
		}
	})
}

// echelonMatchesBatch inserts dense, sparse, zero and dependent vectors into
// an Echelon of k columns and payloads of n, checking the rank against batch
// elimination and every invariant after each insertion, twice (the second
// round after Reset).
func echelonMatchesBatch(t *testing.T, rng *rand.Rand, k, n int) {
	t.Helper()
	g := newGeneration(rng, k, n)
	e, err := NewEchelon(k, n)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ { // the second round reuses e after Reset
		var inserted [][]byte
		for step := 0; !e.Full(); step++ {
			co := make([]byte, k)
			switch {
			case step%5 == 3 && len(inserted) > 1:
				// A combination of rows already sent: never innovative.
				for _, r := range inserted[:len(inserted)/2+1] {
					f := byte(rng.Uint32())
					for j := range co {
						co[j] ^= Mul8(f, r[j])
					}
				}
			case step%7 == 5:
				// all zero
			case step%3 == 1:
				co[rng.IntN(k)] = byte(rng.Uint32()) | 1 // a scaled source block
			default:
				for j := range co {
					co[j] = byte(rng.Uint32())
				}
			}
			payload := g.code(co)
			inserted = append(inserted, co)
			batch, _ := MatrixFrom(len(inserted), k, bytes.Join(inserted, nil))
			wantRank := batch.Rank()
			before := e.Rank()
			inn, err := e.Insert(co, payload)
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("k=%d n=%d round %d step %d", k, n, round, step)
			if e.Rank() != wantRank || inn != (wantRank > before) {
				t.Fatalf("%s: rank %d innovative %v, batch rank %d (was %d)", what, e.Rank(), inn, wantRank, before)
			}
			checkEchelon(t, what, e, g)
			if step > 20*k {
				t.Fatalf("%s: no full rank after %d packets", what, step)
			}
		}
		e.Reset()
		if e.Rank() != 0 || e.Full() {
			t.Fatal("Reset left rows")
		}
		if _, ok := e.Decoded(0); ok {
			t.Fatal("Decoded after Reset")
		}
		if e.Pivot(0) != -1 {
			t.Fatal("Pivot(0) after Reset")
		}
	}
}

func TestEchelonPartialAndShortPayload(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 5))
	const k, n = 6, 200
	g := newGeneration(rng, k, n)
	// Source blocks shorter than N: the coder pads them with zeros.
	for i := range g.src {
		clear(g.src[i][100+10*i:])
	}
	e, _ := NewEchelon(k, n)
	// Block 2 sent in the clear, scaled: decoded at once, at rank 1.
	co := make([]byte, k)
	co[2] = 0x53
	if inn, err := e.Insert(co, g.code(co)[:100+10*2]); !inn || err != nil {
		t.Fatalf("Insert: %v %v", inn, err)
	}
	if b, ok := e.Decoded(2); !ok || !bytes.Equal(b, g.src[2]) {
		t.Fatal("block 2 not decoded from its own scaled row")
	}
	// A row mixing blocks 0 and 2: block 0 becomes decodable too.
	co = make([]byte, k)
	co[0], co[2] = 9, 200
	if inn, _ := e.Insert(co, g.code(co)[:120]); !inn {
		t.Fatal("mix of 0 and 2 not innovative")
	}
	checkEchelon(t, "partial", e, g)
	if _, ok := e.Decoded(0); !ok {
		t.Fatal("block 0 not decoded after the mix")
	}
	if _, ok := e.Decoded(1); ok {
		t.Fatal("block 1 decoded from nothing")
	}
	// Dense rows with short payloads finish the generation.
	for !e.Full() {
		for j := range co {
			co[j] = byte(rng.Uint32())
		}
		e.Insert(co, g.code(co)[:160])
	}
	checkEchelon(t, "short payloads", e, g)

	if _, err := e.Insert(make([]byte, k+1), nil); err == nil {
		t.Error("Insert with K+1 coefficients succeeded")
	}
	if _, err := e.Insert(make([]byte, k), make([]byte, n+1)); err == nil {
		t.Error("Insert with a payload over N succeeded")
	}
	if inn, err := e.Insert(co, g.code(co)); inn || err != nil {
		t.Errorf("Insert at full rank: %v %v", inn, err)
	}
	if _, err := NewEchelon(0, 10); err == nil {
		t.Error("NewEchelon(0, …) succeeded")
	}
}

func TestEchelonAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 6))
	const k, n = 32, 1408
	g := newGeneration(rng, k, n)
	var cos, pls [][]byte
	for i := 0; i < k+4; i++ {
		co := randWide(rng, k)
		cos, pls = append(cos, co), append(pls, g.code(co))
	}
	e, _ := NewEchelon(k, n)
	allocs := testing.AllocsPerRun(5, func() {
		e.Reset()
		for i := range cos {
			if _, err := e.Insert(cos[i], pls[i]); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < k; i++ {
			e.Decoded(i)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per generation, want 0", allocs)
	}
	checkEchelon(t, "allocs", e, g)
}

// FuzzMatrix checks inversion, rank and elimination on arbitrary square
// matrices: an inverse round-trips, ErrSingular comes with a rank below n,
// and the reduced form is reduced.
func FuzzMatrix(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 1, 1, 1, 1})
	f.Add(append([]byte{8}, make([]byte, 64)...))
	c, _ := Cauchy(5, 5)
	f.Add(append([]byte{5}, c.Data()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		n := int(data[0])%12 + 1
		m := NewMatrix(n, n)
		copy(m.data, data[1:])
		r := m.Rank()
		if rt := m.Transpose().Rank(); rt != r {
			t.Fatalf("rank %d, transpose rank %d", r, rt)
		}
		inv, err := m.Invert()
		switch {
		case err == nil:
			if r != n {
				t.Fatalf("inverted a matrix of rank %d < %d", r, n)
			}
			checkInverse(t, "fuzz", m, inv)
		case errors.Is(err, ErrSingular):
			if r == n {
				t.Fatalf("ErrSingular at full rank %d", n)
			}
		default:
			t.Fatal(err)
		}
		red := m.Clone()
		checkRREF(t, "fuzz", red, red.GaussJordan())
		// Non-square too: the first rows as an n/2×n matrix.
		if h := n / 2; h > 0 {
			w, _ := MatrixFrom(h, n, append([]byte(nil), m.data[:h*n]...))
			checkRREF(t, "fuzz half", w, w.GaussJordan())
		}
	})
}

// FuzzEchelon inserts arbitrary coefficient vectors, with payloads coded
// from fixed source blocks, and checks rank against batch elimination and
// every invariant after each insertion.
func FuzzEchelon(f *testing.F) {
	f.Add([]byte{4, 16, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 7, 8, 9, 10})
	f.Add([]byte{3, 0, 1, 2, 3, 2, 4, 6, 0, 0, 0, 5, 5, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		k, n := int(data[0])%16+1, int(data[1])%80
		data = data[2:]
		g := newGeneration(rand.New(rand.NewPCG(uint64(k), uint64(n))), k, n)
		e, err := NewEchelon(k, n)
		if err != nil {
			t.Fatal(err)
		}
		var inserted []byte
		for len(data) >= k {
			co := data[:k]
			data = data[k:]
			inserted = append(inserted, co...)
			batch, _ := MatrixFrom(len(inserted)/k, k, append([]byte(nil), inserted...))
			want := batch.Rank()
			before := e.Rank()
			inn, err := e.Insert(co, g.code(co))
			if err != nil {
				t.Fatal(err)
			}
			if e.Rank() != want || inn != (want > before) {
				t.Fatalf("rank %d innovative %v, batch rank %d (was %d)", e.Rank(), inn, want, before)
			}
			checkEchelon(t, "fuzz", e, g)
		}
	})
}

// BenchmarkEchelon decodes one generation of k blocks of 1408 bytes from
// k+2 dense coded packets (two of them redundant), reporting decoded
// payload GB/s.
func BenchmarkEchelon(b *testing.B) {
	for _, k := range []int{8, 32, 64} {
		b.Run(fmt.Sprintf("k=%d/size=1408", k), func(b *testing.B) {
			const n = 1408
			rng := rand.New(rand.NewPCG(8, 7))
			g := newGeneration(rng, k, n)
			var cos, pls [][]byte
			for i := 0; i < k+2; i++ {
				co := randWide(rng, k)
				cos, pls = append(cos, co), append(pls, g.code(co))
			}
			e, _ := NewEchelon(k, n)
			for b.Loop() {
				e.Reset()
				for i := range cos {
					e.Insert(cos[i], pls[i])
				}
			}
			if !e.Full() {
				b.Fatal("generation not decoded")
			}
			b.ReportMetric(float64(k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
