// Command gf8 generates gf/gf8_amd64.s and its Go stubs gf/gf8_amd64.go: the
// GF(2^8) region kernels of package gf at every vector level. Run it from gf/
// with `go generate` or from the repository root with `make generate-gf`.
//
// Two ways to multiply a vector of bytes by a constant c:
//
//   - PSHUFB split tables (SSSE3, AVX2, AVX-512BW): c·x = lo[x&15] ^ hi[x>>4],
//     where lo and hi are 16-byte tables of c times every low and high nibble.
//     PSHUFB looks up 16 (32, 64) bytes at once.
//   - GFNI: multiplication by a constant is linear over GF(2), so it is an 8×8
//     bit matrix, and VGF2P8AFFINEQB applies such a matrix to every byte. One
//     instruction replaces the shift, two ANDs, two PSHUFBs and an XOR. (The
//     GFNI multiply, VGF2P8MULB, is hard-wired to the AES polynomial 0x11B and
//     cannot serve 0x11D.)
//
// Every kernel for a level has the same shape: a main loop over U vectors per
// iteration (several independent accumulators, so the multiplier's latency
// overlaps), then one pass each of U/2, U/4 … 1 vectors for what is left. The
// AVX-512 levels finish the last partial vector with byte-masked loads and
// stores; the others leave fewer than one vector of bytes to the Go caller.
//
// The dot-product kernels (dst_j ^= Σ_i c_ji·src_i) hold m destinations × U
// vectors in accumulator registers and stream every source once per block:
// the destinations are read and written once per block, not once per source
// as a chain of MulAdd calls would. Coefficient tables are looked up from the
// coefficient byte inside the kernel (one byte load and one broadcast per
// source and destination per block), so the Go side builds nothing per call.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// level describes one instruction-set level of the kernels.
type level struct {
	name   string // suffix of the Go function names
	width  int    // bytes per vector register
	nreg   int    // vector registers available
	gfni   bool   // VGF2P8AFFINEQB with a matrix, else PSHUFB split tables
	evex   bool   // AVX-512: 32 registers, masked tails, VPTERNLOGQ
	sse    bool   // legacy SSE encoding (destructive two-operand forms)
	maxDst int    // destinations per dot-product kernel
}

var levels = []level{
	{name: "SSSE3", width: 16, nreg: 16, sse: true, maxDst: 4},
	{name: "AVX2", width: 32, nreg: 16, maxDst: 3},
	{name: "AVX512", width: 64, nreg: 32, evex: true, maxDst: 8},
	{name: "GFNI", width: 32, nreg: 16, gfni: true, maxDst: 4},
	{name: "GFNI512", width: 64, nreg: 32, gfni: true, evex: true, maxDst: 8},
}

func main() {
	ConstraintExpr("!noasm")
	genCPUID()
	for _, l := range levels {
		genSingle(l, false)
		genSingle(l, true)
		for m := 1; m <= l.maxDst; m++ {
			genDot(l, m, false)
			genDot(l, m, true)
		}
	}
	Generate()
}

func genCPUID() {
	TEXT("cpuid", NOSPLIT, "func(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)")
	Pragma("noescape")
	Doc("cpuid executes CPUID with the given leaf and subleaf.")
	Load(Param("eaxArg"), reg.EAX)
	Load(Param("ecxArg"), reg.ECX)
	CPUID()
	Store(reg.EAX, Return("eax"))
	Store(reg.EBX, Return("ebx"))
	Store(reg.ECX, Return("ecx"))
	Store(reg.EDX, Return("edx"))
	RET()
}

// Vector operations in the encoding of the level.

func (l level) vec() reg.VecVirtual {
	switch l.width {
	case 16:
		return XMM()
	case 32:
		return YMM()
	}
	return ZMM()
}

func (l level) load(m Mem, v reg.VecVirtual) {
	switch {
	case l.sse:
		MOVOU(m, v)
	case l.evex:
		VMOVDQU64(m, v)
	default:
		VMOVDQU(m, v)
	}
}

func (l level) store(v reg.VecVirtual, m Mem) {
	switch {
	case l.sse:
		MOVOU(v, m)
	case l.evex:
		VMOVDQU64(v, m)
	default:
		VMOVDQU(v, m)
	}
}

func (l level) loadMasked(m Mem, k reg.Register, v reg.VecVirtual)  { VMOVDQU8_Z(m, k, v) }
func (l level) storeMasked(v reg.VecVirtual, k reg.Register, m Mem) { VMOVDQU8(v, k, m) }

// xor sets acc ^= a (a may be memory for the VEX and EVEX forms).
func (l level) xor(a Op, acc reg.VecVirtual) {
	switch {
	case l.sse:
		PXOR(a, acc)
	case l.evex:
		VPXORQ(a, acc, acc)
	default:
		VPXOR(a, acc, acc)
	}
}

// nibbleMask returns a register with 0x0F in every byte.
func (l level) nibbleMask() reg.VecVirtual {
	t := GP32()
	MOVL(U32(0x0F0F0F0F), t)
	v := l.vec()
	switch {
	case l.evex:
		VPBROADCASTD(t, v)
	case l.sse:
		MOVD(t, v)
		PSHUFD(U8(0), v, v)
	default:
		x := XMM()
		MOVD(t, x)
		VPBROADCASTD(x, v)
	}
	return v
}

// coef holds what multiplying by one coefficient needs in registers.
type coef struct {
	mat    reg.VecVirtual // GFNI: the bit matrix in every qword
	lo, hi Op             // PSHUFB: the nibble tables (memory for SSE)
}

// loadCoef loads the multiplier for the coefficient whose table entry is at
// m: a uint64 matrix (GFNI) or 32 bytes of nibble tables, low then high.
func (l level) loadCoef(m Mem) coef {
	if l.gfni {
		v := l.vec()
		VPBROADCASTQ(m, v)
		return coef{mat: v}
	}
	hi := m.Offset(16)
	switch l.width {
	case 16:
		// PSHUFB overwrites its table operand: copy from memory each time.
		return coef{lo: m, hi: hi}
	case 32:
		lo, h := YMM(), YMM()
		VBROADCASTI128(m, lo)
		VBROADCASTI128(hi, h)
		return coef{lo: lo, hi: h}
	}
	lo, h := ZMM(), ZMM()
	VBROADCASTI32X4(m, lo)
	VBROADCASTI32X4(hi, h)
	return coef{lo: lo, hi: h}
}

// src is one source vector prepared for multiplication: the bytes (GFNI) or
// their low and high nibbles (PSHUFB).
type src struct {
	x, lo, hi reg.VecVirtual
}

// prep splits x into nibbles for the PSHUFB levels.
func (l level) prep(x reg.VecVirtual, mask reg.VecVirtual) src {
	if l.gfni {
		return src{x: x}
	}
	hi := l.vec()
	switch {
	case l.sse:
		MOVOU(x, hi)
		PSRLQ(U8(4), hi)
		PAND(mask, hi)
		PAND(mask, x)
	case l.evex:
		VPSRLQ(U8(4), x, hi)
		VPANDQ(mask, hi, hi)
		VPANDQ(mask, x, x)
	default:
		VPSRLQ(U8(4), x, hi)
		VPAND(mask, hi, hi)
		VPAND(mask, x, x)
	}
	return src{lo: x, hi: hi}
}

// product returns c·s in a new register.
func (l level) product(c coef, s src) reg.VecVirtual {
	if l.gfni {
		t := l.vec()
		VGF2P8AFFINEQB(U8(0), c.mat, s.x, t)
		return t
	}
	t1, t2 := l.vec(), l.vec()
	switch {
	case l.sse:
		MOVOU(c.lo, t1)
		PSHUFB(s.lo, t1)
		MOVOU(c.hi, t2)
		PSHUFB(s.hi, t2)
		PXOR(t2, t1)
	case l.evex:
		VPSHUFB(s.lo, c.lo, t1)
		VPSHUFB(s.hi, c.hi, t2)
		VPXORQ(t2, t1, t1)
	default:
		VPSHUFB(s.lo, c.lo, t1)
		VPSHUFB(s.hi, c.hi, t2)
		VPXOR(t2, t1, t1)
	}
	return t1
}

// mulAcc sets acc ^= c·s.
func (l level) mulAcc(c coef, s src, acc reg.VecVirtual) {
	switch {
	case l.gfni:
		t := l.vec()
		VGF2P8AFFINEQB(U8(0), c.mat, s.x, t)
		l.xor(t, acc)
	case l.evex:
		// One three-way XOR folds both halves into the accumulator.
		t1, t2 := l.vec(), l.vec()
		VPSHUFB(s.lo, c.lo, t1)
		VPSHUFB(s.hi, c.hi, t2)
		VPTERNLOGQ(U8(0x96), t2, t1, acc)
	case l.sse:
		t1, t2 := l.vec(), l.vec()
		MOVOU(c.lo, t1)
		PSHUFB(s.lo, t1)
		MOVOU(c.hi, t2)
		PSHUFB(s.hi, t2)
		PXOR(t1, acc)
		PXOR(t2, acc)
	default:
		t1, t2 := l.vec(), l.vec()
		VPSHUFB(s.lo, c.lo, t1)
		VPSHUFB(s.hi, c.hi, t2)
		VPXOR(t1, acc, acc)
		VPXOR(t2, acc, acc)
	}
}

// passVectors returns how many vectors a dot-product pass with m
// destinations holds in accumulators: what the registers allow after the
// coefficients of one source (a matrix, or two tables, per destination) and
// the temporaries, up to 24 (1536 bytes: a 1408-byte payload at any
// alignment in one pass).
func (l level) passVectors(m int) int {
	var fixed int
	switch {
	case l.gfni:
		fixed = m + 2 // matrices; source, product
	case l.sse:
		fixed = 5 // tables stay in memory; mask, low, high, two products
	default:
		fixed = 2*m + 5 // tables; mask, low, high, two products
	}
	return min(24, (l.nreg-fixed)/m)
}

// tailMask sets k to the low rem bits (rem < 64).
func tailMask(rem reg.Register) reg.Register {
	t := GP64()
	MOVQ(I64(-1), t)
	BZHIQ(rem, t, t)
	k := K()
	KMOVQ(t, k)
	return k
}

// table returns the level's per-coefficient table, a package variable of gf
// built at init: gfniMat8 (8-byte matrices) or nibble8 (32-byte table pairs).
func (l level) table() (sym Mem, entry int) {
	if l.gfni {
		return NewDataAddr(Symbol{Name: "·gfniMat8"}, 0), 8
	}
	return NewDataAddr(Symbol{Name: "·nibble8"}, 0), 32
}

// coefAddr returns the address of coefficient cb's table entry, tab being
// the table's base address in a register. cb is clobbered for PSHUFB
// entries, which are too large for a scaled index.
func (l level) coefAddr(tab, cb reg.Register) Mem {
	if _, entry := l.table(); entry == 8 {
		return Mem{Base: tab, Index: cb, Scale: 8}
	}
	SHLQ(U8(5), cb)
	return Mem{Base: tab, Index: cb, Scale: 1}
}

// genSingle generates mul<L> or mulAdd<L>: one source, one destination.
func genSingle(l level, add bool) {
	name, what := "mul"+l.name, "dst = c·src"
	if add {
		name, what = "mulAdd"+l.name, "dst ^= c·src"
	}
	TEXT(name, NOSPLIT, "func(dst, src []byte, c byte)")
	Pragma("noescape")
	if l.evex {
		Doc(fmt.Sprintf("%s sets %s over len(src) bytes; len(dst) ≥ len(src).", name, what))
	} else {
		Doc(fmt.Sprintf("%s sets %s over len(src) rounded down to %d bytes; len(dst) ≥ len(src).", name, what, l.width))
	}
	dp := Load(Param("dst").Base(), GP64())
	sp := Load(Param("src").Base(), GP64())
	n := Load(Param("src").Len(), GP64())
	cb := Load(Param("c"), GP64())
	tab := GP64()
	sym, _ := l.table()
	LEAQ(sym, tab)
	var mask reg.VecVirtual
	if !l.gfni {
		mask = l.nibbleMask()
	}
	c := l.loadCoef(l.coefAddr(tab, cb))

	W := l.width
	u := 8
	if !l.gfni && !l.evex {
		u = 4
	}
	off := GP64()
	XORQ(off, off)
	block := func(u int, k reg.Register, _ string) {
		xs := make([]src, u)
		for i := range xs {
			x := l.vec()
			m := Mem{Base: sp, Index: off, Scale: 1, Disp: i * W}
			if k != nil {
				l.loadMasked(m, k, x)
			} else {
				l.load(m, x)
			}
			xs[i] = l.prep(x, mask)
		}
		for i, s := range xs {
			p := l.product(c, s)
			m := Mem{Base: dp, Index: off, Scale: 1, Disp: i * W}
			if add {
				if k != nil {
					d := l.vec()
					l.loadMasked(m, k, d)
					l.xor(d, p)
				} else if l.sse {
					d := l.vec()
					l.load(m, d)
					l.xor(d, p)
				} else {
					l.xor(m, p)
				}
			}
			if k != nil {
				l.storeMasked(p, k, m)
			} else {
				l.store(p, m)
			}
		}
	}
	loopTail(name, l, u, n, off, dp, block)
	RET()
}

// loopTail emits the loops over [0, n) for a kernel. On the AVX-512 levels
// a masked head first brings align (the destination) to a 64-byte boundary:
// stores that split cache lines cost twice, and when source and destination
// are equally misaligned, as payloads at the same offset in their packet
// buffers are, the loads come out aligned as well. Then a main loop of u
// vectors per iteration, single passes of u/2 … 1 vectors, and on the
// AVX-512 levels a masked last vector. block(u, k, tag) emits the body for u
// vectors at off; k is the byte mask or nil; tag names its labels uniquely.
func loopTail(name string, l level, u int, n, off, align reg.Register, block func(u int, k reg.Register, tag string)) {
	W := l.width
	rem := GP64()
	MOVQ(n, rem)
	if l.evex {
		head := GP64()
		MOVQ(align, head)
		NEGQ(head)
		ANDQ(U8(63), head)
		JZ(LabelRef(name + "_loop"))
		CMPQ(head, rem)
		CMOVQGT(rem, head)
		k := tailMask(head)
		block(1, k, "head")
		ADDQ(head, off)
		SUBQ(head, rem)
	}
	Label(name + "_loop")
	CMPQ(rem, U32(u*W))
	JB(LabelRef(name + "_tail"))
	block(u, nil, fmt.Sprintf("u%d", u))
	ADDQ(U32(u*W), off)
	SUBQ(U32(u*W), rem)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_tail")
	for v := u / 2; v >= 1; v /= 2 {
		skip := fmt.Sprintf("%s_skip%d", name, v)
		CMPQ(rem, U32(v*W))
		JB(LabelRef(skip))
		block(v, nil, fmt.Sprintf("u%d", v))
		ADDQ(U32(v*W), off)
		SUBQ(U32(v*W), rem)
		Label(skip)
	}
	if l.evex {
		TESTQ(rem, rem)
		JZ(LabelRef(name + "_done"))
		k := tailMask(rem)
		block(1, k, "tail1")
		Label(name + "_done")
	}
	if l.width > 16 {
		VZEROUPPER()
	}
}

// genDot generates dot<L>x<m> and dotAdd<L>x<m>: with k sources and m
// destinations, dst[j][x] (^)= Σ_i coef[j*k+i]·src[i][x] for x < n.
//
// The bytes are cut into passes of up to V vectors (passVectors); a pass
// keeps m×V accumulators in registers and streams every source through them
// once, so the per-source work of a pass (its pointer, its m coefficients)
// is paid once per V vectors, and a 1408-byte payload with one destination
// is a single pass. The last pass takes exactly the vectors left, so there
// is no cascade of smaller passes each walking all sources again.
//
// On the AVX-512 levels the passes start at the 64-byte boundary at or below
// dst[0]: the first vector is masked to leave out the bytes before the
// buffers and the last to leave out those past n, so stores never split
// cache lines and, when all buffers share dst[0]'s alignment (payloads at
// the same offset in their packet buffers), no load does either. Masked-off
// bytes are neither read nor written.
func genDot(l level, m int, add bool) {
	name := fmt.Sprintf("dot%sx%d", l.name, m)
	what := "="
	if add {
		name = fmt.Sprintf("dotAdd%sx%d", l.name, m)
		what = "^="
	}
	TEXT(name, NOSPLIT, "func(coef *byte, k int, src, dst [][]byte, n int)")
	Pragma("noescape")
	rounding := ""
	if !l.evex {
		rounding = fmt.Sprintf(" rounded down to %d", l.width)
	}
	Doc(fmt.Sprintf("%s sets dst[j][x] %s Σ_i coef[j*k+i]·src[i][x] for j < %d, i < k, x < n%s; k ≥ 1, n ≥ 1.", name, what, m, rounding))

	W := l.width
	V := l.passVectors(m)
	var mask reg.VecVirtual
	if !l.gfni {
		mask = l.nibbleMask()
	}
	sym, _ := l.table()
	off, rem := GP64(), GP64()
	Load(Param("n"), rem)
	var kfirst reg.Register
	if l.evex {
		dst := Load(Param("dst").Base(), GP64())
		mis := GP64()
		MOVQ(Mem{Base: dst}, mis)
		ANDQ(U8(63), mis)
		MOVQ(mis, off)
		NEGQ(off)
		ADDQ(mis, rem)
		t := GP64()
		MOVQ(I64(-1), t)
		SHLXQ(mis, t, t)
		kfirst = K()
		KMOVQ(t, kfirst)
	} else {
		XORQ(off, off)
	}

	// pass emits one pass over v vectors at off; kf and kl mask the first
	// and last vector (nil: unmasked; the same register when v is 1).
	pass := func(v int, kf, kl reg.Register, tag string) {
		maskOf := func(i int) reg.Register {
			switch {
			case i == 0 && kf != nil:
				return kf
			case i == v-1 && kl != nil:
				return kl
			}
			return nil
		}
		load := func(mem Mem, i int, x reg.VecVirtual) {
			if k := maskOf(i); k != nil {
				l.loadMasked(mem, k, x)
			} else {
				l.load(mem, x)
			}
		}
		accs := make([][]reg.VecVirtual, m)
		for j := range accs {
			accs[j] = make([]reg.VecVirtual, v)
		}
		if add {
			dst := Load(Param("dst").Base(), GP64())
			for j := range accs {
				dp := GP64()
				MOVQ(Mem{Base: dst, Disp: 24 * j}, dp)
				for i := range accs[j] {
					accs[j][i] = l.vec()
					load(Mem{Base: dp, Index: off, Scale: 1, Disp: i * W}, i, accs[j][i])
				}
			}
		}
		sp := Load(Param("src").Base(), GP64())
		cp := Load(Param("coef"), GP64())
		cnt := Load(Param("k"), GP64())
		tab := GP64()
		LEAQ(sym, tab)
		var kstride reg.Register
		if m > 1 {
			kstride = Load(Param("k"), GP64())
		}
		label := name + "_" + tag
		// step adds source *sp times column *cp of the coefficients to the
		// accumulators; with first set (the overwriting kernel's first
		// source) it defines them instead, so nothing needs zeroing.
		step := func(first bool) {
			cs := make([]coef, m)
			row := cp
			if m > 1 {
				row = GP64()
				MOVQ(cp, row)
			}
			for j := range cs {
				cb := GP64()
				MOVBQZX(Mem{Base: row}, cb)
				if j < m-1 {
					ADDQ(kstride, row)
				}
				cs[j] = l.loadCoef(l.coefAddr(tab, cb))
			}
			p := GP64()
			MOVQ(Mem{Base: sp}, p)
			for i := 0; i < v; i++ {
				x := l.vec()
				load(Mem{Base: p, Index: off, Scale: 1, Disp: i * W}, i, x)
				s := l.prep(x, mask)
				for j, c := range cs {
					if first {
						accs[j][i] = l.product(c, s)
					} else {
						l.mulAcc(c, s, accs[j][i])
					}
				}
			}
			ADDQ(U8(24), sp)
			INCQ(cp)
			DECQ(cnt)
		}
		if !add {
			step(true)
			JZ(LabelRef(label + "_store"))
		}
		Label(label)
		step(false)
		JNZ(LabelRef(label))
		if !add {
			Label(label + "_store")
		}
		dst := Load(Param("dst").Base(), GP64())
		for j := range accs {
			dp := GP64()
			MOVQ(Mem{Base: dst, Disp: 24 * j}, dp)
			for i, a := range accs[j] {
				mem := Mem{Base: dp, Index: off, Scale: 1, Disp: i * W}
				if k := maskOf(i); k != nil {
					l.storeMasked(a, k, mem)
				} else {
					l.store(a, mem)
				}
			}
		}
	}

	// Full passes while more than one pass is left (AVX-512: the last pass,
	// with its masked end, is taken below even when it is full).
	Label(name + "_loop")
	CMPQ(rem, U32(V*W))
	if l.evex {
		JBE(LabelRef(name + "_last"))
	} else {
		JB(LabelRef(name + "_last"))
	}
	pass(V, kfirst, nil, "full")
	ADDQ(U32(V*W), off)
	SUBQ(U32(V*W), rem)
	if l.evex {
		KXNORQ(kfirst, kfirst, kfirst) // only the first pass starts before dst
	}
	JMP(LabelRef(name + "_loop"))

	Label(name + "_last")
	vs := GP64()
	if l.evex {
		// rem is 1…V·64: v = ⌈rem/64⌉ vectors, the last holding
		// rem-(v-1)·64 bytes (BZHI of 64 leaves all ones).
		MOVQ(rem, vs)
		ADDQ(U8(63), vs)
		SHRQ(U8(6), vs)
		last := GP64()
		MOVQ(vs, last)
		SHLQ(U8(6), last)
		SUBQ(U8(64), last)
		NEGQ(last)
		ADDQ(rem, last)
		t := GP64()
		MOVQ(I64(-1), t)
		BZHIQ(last, t, t)
		klast := K()
		KMOVQ(t, klast)
		for v := 1; v <= V; v++ {
			next := fmt.Sprintf("%s_not%d", name, v)
			CMPQ(vs, U8(v))
			JNE(LabelRef(next))
			if v == 1 {
				both := K()
				KANDQ(kfirst, klast, both)
				pass(1, both, both, "v1")
			} else {
				pass(v, kfirst, klast, fmt.Sprintf("v%d", v))
			}
			JMP(LabelRef(name + "_done"))
			Label(next)
		}
	} else {
		MOVQ(rem, vs)
		SHRQ(U8(bitsOf(W)), vs)
		for v := 1; v < V; v++ {
			next := fmt.Sprintf("%s_not%d", name, v)
			CMPQ(vs, U8(v))
			JNE(LabelRef(next))
			pass(v, nil, nil, fmt.Sprintf("v%d", v))
			JMP(LabelRef(name + "_done"))
			Label(next)
		}
	}
	Label(name + "_done")
	if l.width > 16 {
		VZEROUPPER()
	}
	RET()
}

func bitsOf(w int) int {
	b := 0
	for 1<<b < w {
		b++
	}
	return b
}
