package gf

import "testing"

// mulSlow multiplies in GF(2^8) mod 0x11D bit by bit, independent of tables.
func mulSlow(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= Poly8 & 0xFF
		}
		b >>= 1
	}
	return p
}

func TestMul8Table(t *testing.T) {
	for a := 0; a < 256; a++ {
		for b := 0; b < 256; b++ {
			want := mulSlow(byte(a), byte(b))
			if got := Mul8(byte(a), byte(b)); got != want {
				t.Fatalf("Mul8(%#x, %#x) = %#x, want %#x", a, b, got, want)
			}
			if got := mul8[a][b]; got != want {
				t.Fatalf("mul8[%#x][%#x] = %#x, want %#x", a, b, got, want)
			}
		}
	}
}

// Products and powers as ISA-L (gf_mul, gf_inv), Jerasure and the QR-code
// antilog table over 0x11D give them.
func TestKnownValues8(t *testing.T) {
	muls := []struct{ a, b, want byte }{
		{2, 0x80, 0x1D}, // the reduction itself
		{3, 7, 9},       // (x+1)(x²+x+1) = x³+1, no reduction
		{0x80, 0x80, 0x13},
		{0xFF, 0xFF, 0xE2},
		{0x8E, 2, 1},
		{0, 0xAB, 0},
		{1, 0xAB, 0xAB},
	}
	for _, m := range muls {
		if got := Mul8(m.a, m.b); got != m.want {
			t.Errorf("Mul8(%#x, %#x) = %#x, want %#x", m.a, m.b, got, m.want)
		}
	}
	// α^1 … α^25 from the QR-code table.
	pows := []byte{2, 4, 8, 16, 32, 64, 128, 29, 58, 116, 232, 205, 135, 19, 38, 76, 152, 45, 90, 180, 117, 234, 201, 143, 3}
	for i, want := range pows {
		if got := Exp8(i + 1); got != want {
			t.Errorf("Exp8(%d) = %d, want %d", i+1, got, want)
		}
		if n, ok := Log8(want); !ok || n != i+1 {
			t.Errorf("Log8(%d) = %d, %v, want %d", want, n, ok, i+1)
		}
	}
	if got := Inv8(2); got != 0x8E {
		t.Errorf("Inv8(2) = %#x, want 0x8e", got)
	}
	if got := Exp8(-1); got != 0x8E {
		t.Errorf("Exp8(-1) = %#x, want 0x8e", got)
	}
	if got := Exp8(255); got != 1 {
		t.Errorf("Exp8(255) = %#x, want 1", got)
	}
}

func TestFieldAxioms8(t *testing.T) {
	for a := 0; a < 256; a++ {
		A := byte(a)
		if Mul8(A, 1) != A || Mul8(A, 0) != 0 {
			t.Fatalf("identity/zero fails for %#x", a)
		}
		if a != 0 {
			if Mul8(A, Inv8(A)) != 1 {
				t.Fatalf("%#x·Inv8 ≠ 1", a)
			}
			n, ok := Log8(A)
			if !ok || n < 0 || n > 254 || Exp8(n) != A {
				t.Fatalf("Exp8(Log8(%#x)) round trip: %d %v", a, n, ok)
			}
			if Pow8(A, -1) != Inv8(A) || Pow8(A, 255) != 1 || Pow8(A, 256) != A {
				t.Fatalf("Pow8 on %#x", a)
			}
		}
		for b := 0; b < 256; b++ {
			B := byte(b)
			if Mul8(A, B) != Mul8(B, A) {
				t.Fatalf("commutativity %#x %#x", a, b)
			}
			if b != 0 && Mul8(Div8(A, B), B) != A {
				t.Fatalf("Div8(%#x, %#x)·b ≠ a", a, b)
			}
			if b == 0 && Div8(A, B) != 0 {
				t.Fatalf("Div8(%#x, 0) ≠ 0", a)
			}
		}
	}
	if Inv8(0) != 0 {
		t.Fatal("Inv8(0) ≠ 0")
	}
	if _, ok := Log8(0); ok {
		t.Fatal("Log8(0) ok")
	}
	if Pow8(0, 0) != 1 || Pow8(0, 3) != 0 {
		t.Fatal("Pow8 of zero")
	}
	// Associativity and distributivity on a stride through all triples.
	for a := 0; a < 256; a += 3 {
		for b := 0; b < 256; b += 5 {
			for c := 0; c < 256; c++ {
				A, B, C := byte(a), byte(b), byte(c)
				if Mul8(Mul8(A, B), C) != Mul8(A, Mul8(B, C)) {
					t.Fatalf("associativity %#x %#x %#x", a, b, c)
				}
				if Mul8(A, B^C) != Mul8(A, B)^Mul8(A, C) {
					t.Fatalf("distributivity %#x %#x %#x", a, b, c)
				}
			}
		}
	}
	// α generates the whole group: its powers are 255 distinct elements.
	var seen [256]bool
	for i := 0; i < 255; i++ {
		e := Exp8(i)
		if e == 0 || seen[e] {
			t.Fatalf("α^%d = %#x repeats", i, e)
		}
		seen[e] = true
	}
}

func TestLevels(t *testing.T) {
	if !LevelGeneric.Supported() || !Best().Supported() {
		t.Fatal("generic or best level not supported")
	}
	if CurrentLevel() != Best() {
		t.Fatalf("CurrentLevel %v, Best %v", CurrentLevel(), Best())
	}
	for _, l := range Levels() {
		restore, err := SetLevel(l)
		if err != nil {
			t.Fatalf("SetLevel(%v): %v", l, err)
		}
		if CurrentLevel() != l {
			t.Fatalf("CurrentLevel %v after SetLevel(%v)", CurrentLevel(), l)
		}
		restore()
	}
	if CurrentLevel() != Best() {
		t.Fatal("restore did not restore")
	}
	if _, err := SetLevel(numLevels); err == nil {
		t.Fatal("SetLevel of an unknown level succeeded")
	}
	if Level(-1).Supported() || Level(99).String() != "Level(99)" || LevelGFNI512.String() != "gfni512" {
		t.Fatal("Level bounds or names")
	}
}
