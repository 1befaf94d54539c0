package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/testenv"
)

const header = "../../../../ports/dpdk/lr_meta.h"

// TestHeaderUpToDate: the committed header is what the packet package says
// today. make lint checks the same; this catches it in go test too.
func TestHeaderUpToDate(t *testing.T) {
	got, err := Generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("ports/dpdk/lr_meta.h is stale: run make generate (go generate ./appliance/packet) and commit it")
	}
}

// src is a package for the translator: a struct, constants and the functions
// the cases add.
const src = `package p

//metagen:c m
type M struct {
	a    uint16
	f    uint8
	_    uint8
	n    uint32
	t    int64
	base uintptr
	off  uint32
	in   struct {
		x, y uint8
		z    uint16
	}
}

//metagen:c
const (
	FlagA uint8 = 1 << iota
	FlagB
)

type Kind uint8

//metagen:c
const (
	KindNone Kind = iota
	Some
)

//metagen:c
const Big = 0xFFFF

func (p *M) Data() []byte { return nil }

func plain() uint32 { return 1 }
`

func gen(t *testing.T, fns string) (string, error) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src+fns, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	h, err := generate(fset, []*ast.File{f})
	return string(h), err
}

func TestTranslate(t *testing.T) {
	h, err := gen(t, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#define LR_FLAG_A 0x01 // p.FlagA", "#define LR_FLAG_B 0x02 // p.FlagB",
		"#define LR_KIND_NONE 0 // p.KindNone", "#define LR_KIND_SOME 1 // p.Some", "#define LR_BIG 0xFFFF // p.Big",
		"\tuint8_t pad0;\n", "\tuint8_t in_x;\n", "\tuint16_t in_z;\n",
		`_Static_assert(offsetof(struct m, in_z) == 30, "p.M.in.z");`, `_Static_assert(sizeof(struct m) == 32, "p.M");`,
	} {
		if !strings.Contains(h, want) {
			t.Errorf("no %q in\n%s", want, h)
		}
	}

	for _, c := range []struct {
		name, goSrc string
		want        []string // lines of the C function, each trimmed
	}{
		{"narrow arithmetic wraps as in Go", `func (p *M) inc() { p.a = p.a + 1; p.f++; p.f += 3 }`,
			[]string{"p->a = (uint16_t)(p->a + 1);", "p->f++;", "p->f += 3;"}},
		{"and-not, flags and named constants", `func (p *M) clear(k Kind) bool { p.f &^= FlagB; p.in.x = uint8(Some); return k == Some }`,
			[]string{"p->f &= (uint8_t)~LR_FLAG_B;", "p->in_x = 1;", "return k == LR_KIND_SOME;"}},
		{"constants too big for C's int", `func wide(x int64, u uint64) uint64 { if x < -3000000000 || x > 1<<40 { return 1 << 63 }; return u | 0xFFFFFFFF }`,
			[]string{"if ((x < INT64_C(-3000000000)) || (x > INT64_C(0x10000000000))) {", "return UINT64_C(0x8000000000000000);", "}",
				"return u | 0xFFFFFFFFu;"}},
		{"a switch with its default first", `func sw(x int32) int32 {
			switch y := x * 2; {
			default:
				return y
			case x == 1, x == 2:
				return 0
			case y > 5:
				return -1
			}
		}`, []string{"{", "int32_t y = x * 2;", "if ((x == 1) || (x == 2)) {", "return 0;", "} else if (y > 5) {", "return (-1);",
			"} else {", "return y;", "}", "}"}},
		{"if, else if, else", `func (p *M) pick(v uint32) { if v == 0 { p.n = 1 } else if v < 9 { p.n = v } else { p.n = v >> 3 } }`,
			[]string{"if (v == 0) {", "p->n = 1;", "} else if (v < 9) {", "p->n = v;", "} else {", "p->n = v >> 3;", "}"}},
		{"a tuple runs in order when no part reads a target", `func (p *M) set(v uint32) { d := p.Data(); p.a, p.n, d[v] = Big, v, byte(v) }`,
			[]string{"uint8_t *d = ((uint8_t *)p->base + p->off);", "p->a = LR_BIG;", "p->n = v;", "d[v] = (uint8_t)v;"}},
		{"calls of translated functions, declared first", `func (p *M) outer() uint32 { return twice(p.n) + p.half() }

			//metagen:c lr_twice
			func twice(v uint32) uint32 { return v << 1 }

			//metagen:c lr_half
			func (p *M) half() uint32 { return p.n >> 1 }`,
			[]string{"return lr_twice(p->n) + lr_half(p);"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := gen(t, "\n//metagen:c lr_test\n"+c.goSrc+"\n")
			if err != nil {
				t.Fatal(err)
			}
			body := h[strings.Index(h, "\nstatic inline"):]
			body = body[strings.Index(body, " lr_test(")+1:]
			body = body[strings.Index(body, "\n{\n")+3 : strings.Index(body, "\n}\n")]
			var got []string
			for _, l := range strings.Split(body, "\n") {
				got = append(got, strings.TrimSpace(l))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestReject: what C would not do as Go does is an error at its place.
func TestReject(t *testing.T) {
	for _, c := range []struct{ goSrc, want string }{
		{"func f(x uint32) uint32 { return x / 3 }", "x.go:40:34: f: /: C's division differs"},
		{"func f(x, n uint32) uint32 { return x << n }", "x.go:40:42: f: a shift by other than a constant below the width"},
		{"func f(x uint32) uint32 { return x >> 32 }", "x.go:40:39: f: a shift by other than a constant below the width"},
		{"func (p *M) g() { p.n, p.off = p.off, p.n }", "x.go:40:34: g: a tuple assignment that reads its target off: split it"},
		{"func f() { for {} }", "x.go:40:12: f: *ast.ForStmt is not in the subset"},
		{"func f() uint32 { return plain() }", "x.go:40:26: f: a call of a function not marked //metagen:c"},
		{"func f(x uint32) float64 { return float64(x) }", "f: C has no type for float64"},
		{"func f(x uint32) (n uint32) { return x }", "f: C takes one unnamed result at most"},
		{"func f(x int32) int32 { switch x { case 1: return 0 }; return x }", "f: a switch with a tag"},
		{"func f(m M) uint32 { return m.n }", "f: C has no type for p.M"},
	} {
		_, err := gen(t, "\n//metagen:c lr_f\n"+c.goSrc+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.goSrc, err, c.want)
		}
	}
	for _, c := range []struct{ structSrc, want string }{
		{"struct { a uint16; n uint32 }", "x.go:4:6: Q has 2 bytes of implicit padding before n: declare them as a _ field"},
		{"struct { n uint32; a uint16 }", "Q has 2 bytes of implicit padding at its end"},
		{"struct { s string }", "x.go:4:17: field s is a string, which C does not mirror"},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package p\n\n//metagen:c q\ntype Q "+c.structSrc+"\n", parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := generate(fset, []*ast.File{f}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.structSrc, err, c.want)
		}
	}
}

// Globals: Go never moves them, so their addresses can stand in packet
// metadata, as C's buffers do.
var (
	metaBlock [packet.MetaSize / 8]uint64
	txBuf     [512]byte
)

// delayRows are (rx, tx) pairs at the edges of RFC 9197's transit delay.
var delayRows = [][2]int64{
	{0, 5}, {100, 99}, {100, 100}, {100, 101}, {1, 1 << 31}, {1, 1<<31 + 1}, {7, 7 + 1<<40}, {-5, 3}, {1 << 62, -1 << 62},
}

// TestGeneratedC compiles the committed header with the system's C compiler,
// warnings as errors and without DPDK, and runs its functions against packet's
// Go on the same inputs: the C tx path's reset and transit delay are Go's.
func TestGeneratedC(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = testenv.RequireCmd(t, "cc")
	}
	var rows strings.Builder
	for _, r := range delayRows {
		fmt.Fprintf(&rows, "{INT64_C(%d), INT64_C(%d)}, ", r[0], r[1])
	}
	prog := `#include <stdio.h>
#include <string.h>
#include "lr_meta.h"

static void dump(const void *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", ((const uint8_t *)b)[i]);
	printf("\n");
}

int main(void)
{
	static const int64_t rows[][2] = {` + rows.String() + `};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		printf("%u\n", lr_transit_delay(rows[i][0], rows[i][1]));

	struct lr_meta m;
	memset(&m, 0xA5, sizeof(m));
	lr_meta_reset(&m, 320, 0);
	dump(&m, sizeof(m));

	static uint8_t buf[512];
	memset(&m, 0, sizeof(m));
	m.base = (uintptr_t)buf;
	lr_meta_reset(&m, 320, 64);
	m.rx_time = 1000;
	m.tx_delay_at = 10;
	m.flags = LR_FLAG_TX_DELAY | LR_FLAG_LOCAL;
	lr_meta_write_tx_delay(&m, 1000 + 123456);
	dump(buf + 320, 64);
	printf("%02x\n", m.flags);
	return 0;
}
`
	dir := t.TempDir()
	abs, err := filepath.Abs(filepath.Dir(header))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t.c"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "t")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I", abs, "-o", bin,
		filepath.Join(dir, "t.c")).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}

	var want strings.Builder
	for _, r := range delayRows {
		fmt.Fprintf(&want, "%d\n", packet.TransitDelay(r[0], r[1]))
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&metaBlock[0])), packet.MetaSize)
	for i := range b {
		b[i] = 0xA5
	}
	p := (*packet.Packet)(unsafe.Pointer(&metaBlock[0]))
	p.Reset(320)
	fmt.Fprintf(&want, "%x\n", b)

	for i := range b {
		b[i] = 0
	}
	p.Init(uintptr(unsafe.Pointer(&txBuf[0])), len(txBuf), 320, 0, 0)
	if _, err := p.Append(64); err != nil {
		t.Fatal(err)
	}
	p.RxTime = 1000
	p.SetTxDelay(p.Data()[10:14])
	p.SetFlag(packet.FlagLocal)
	p.StampTx(1000 + 123456)
	fmt.Fprintf(&want, "%x\n%02x\n", txBuf[320:384], p.Flags()&^packet.FlagMoved)

	if string(out) != want.String() {
		t.Errorf("C:\n%s\nGo:\n%s", out, want.String())
	}
}
