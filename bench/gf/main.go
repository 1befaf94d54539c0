// Command gf times linerate's GF(2^8) kernels side by side with Intel ISA-L
// (through cgo) and klauspost/reedsolomon, in one process, on the same
// buffers, after checking that all three compute the same bytes. Run it with
// `make bench-gf`.
//
// What each row measures:
//
//   - MulAdd (dst ^= c·src, one coefficient): gf.MulAdd at the best level;
//     ISA-L gf_vect_mad(len, 1, 0, tbl, src, dst) with tbl from
//     gf_vect_mul_init(c); klauspost Encoder.EncodeIdx(src, 0, [dst]) of an
//     encoder with 1 data and 1 parity shard and the custom matrix [[c]], its
//     public way to reach galMulSliceXor, which adds c·src into the parity.
//   - Encode k=32 (one parity from 32 data shards, the Cauchy row
//     1/(32 ⊕ j) that all three share): gf.MulMulti, the fused dot product;
//     ISA-L ec_encode_data with tables from ec_init_tables; klauspost
//     Encoder.Encode with WithCauchyMatrix. GB/s counts source bytes.
//
// ISA-L's loops run inside C, so no cgo call is timed per operation.
// klauspost runs with WithMaxGoroutines(1): every implementation uses one
// core. Runs are interleaved round-robin, so a neighbour on a shared machine
// disturbs the three alike: the table gives each implementation's median
// and best run, and each ratio is the median over rounds of that round's
// ratio, which a slowly varying load cancels out of.
//
// klauspost/reedsolomon is in linerate's go.mod for this program only, and
// ISA-L is linked only here; the product uses neither.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/klauspost/reedsolomon"
	"github.com/linerate/linerate/gf"
)

const (
	encodeK = 32
	coefMad = 0x8E // any coefficient other than 0 and 1
)

// bench is one implementation of one operation.
type bench struct {
	op, impl string
	size     int             // bytes per buffer
	counted  int             // bytes counted per operation
	run      func(iters int) // iters operations
	check    func() error    // one operation, compared with the scalar reference
	results  []float64       // GB/s per run
}

func main() {
	runs := flag.Int("runs", 21, "timed runs per implementation (median reported)")
	dur := flag.Duration("dur", 20*time.Millisecond, "length of one timed run")
	level := flag.String("level", "", "force this gf level instead of the best (generic, avx2, gfni512 …)")
	flag.Parse()
	if *level != "" {
		l, ok := levelByName(*level)
		if !ok {
			fmt.Fprintf(os.Stderr, "bench/gf: unknown or unsupported level %q (have %v)\n", *level, gf.Levels())
			os.Exit(2)
		}
		if _, err := gf.SetLevel(l); err != nil {
			fmt.Fprintln(os.Stderr, "bench/gf:", err)
			os.Exit(2)
		}
	}

	benches, err := setup([]int{1408, 65536}, 1408)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/gf:", err)
		os.Exit(1)
	}
	for _, b := range benches {
		if err := b.check(); err != nil {
			fmt.Fprintf(os.Stderr, "bench/gf: %s %s: output differs: %v\n", b.op, b.impl, err)
			os.Exit(1)
		}
	}
	fmt.Printf("gf level %v; all implementations produce identical output\n\n", gf.CurrentLevel())

	// Warm up and size each run to about dur.
	iters := make([]int, len(benches))
	for i, b := range benches {
		n := 16
		for {
			start := time.Now()
			b.run(n)
			if el := time.Since(start); el > *dur/4 {
				iters[i] = max(1, int(float64(n)*float64(*dur)/float64(el)))
				break
			}
			n *= 2
		}
	}
	for r := 0; r < *runs; r++ {
		for i, b := range benches {
			start := time.Now()
			b.run(iters[i])
			el := time.Since(start)
			b.results = append(b.results, float64(b.counted)*float64(iters[i])/el.Seconds()/1e9)
		}
	}
	report(os.Stdout, benches)
}

func levelByName(name string) (gf.Level, bool) {
	for _, l := range gf.Levels() {
		if l.String() == name {
			return l, true
		}
	}
	return 0, false
}

// setup builds every bench on shared C buffers and the check of each.
func setup(madSizes []int, encodeSize int) ([]*bench, error) {
	rng := rand.New(rand.NewPCG(8, 0x11D))
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	var benches []*bench

	for _, size := range madSizes {
		src, dst, init := cBytes(size), cBytes(size), make([]byte, size)
		fill(src)
		fill(init)
		want := slices.Clone(init)
		for i, s := range src {
			want[i] ^= gf.Mul8(coefMad, s)
		}
		// Each check runs one operation on dst reset to init.
		checkMad := func(one func()) func() error {
			return func() error {
				copy(dst, init)
				one()
				return diff(dst, want)
			}
		}
		im := newIsalMad(coefMad)
		kp, err := reedsolomon.New(1, 1, reedsolomon.WithCustomMatrix([][]byte{{coefMad}}), reedsolomon.WithMaxGoroutines(1))
		if err != nil {
			return nil, fmt.Errorf("klauspost encoder: %w", err)
		}
		parity := [][]byte{dst}
		op := "MulAdd"
		benches = append(benches,
			&bench{op: op, impl: "linerate gf", size: size, counted: size,
				run: func(n int) {
					for range n {
						gf.MulAdd(dst, src, coefMad)
					}
				},
				check: checkMad(func() { gf.MulAdd(dst, src, coefMad) })},
			&bench{op: op, impl: "ISA-L", size: size, counted: size,
				run:   func(n int) { im.run(n, dst, src) },
				check: checkMad(func() { im.run(1, dst, src) })},
			&bench{op: op, impl: "klauspost", size: size, counted: size,
				run: func(n int) {
					for range n {
						_ = kp.EncodeIdx(src, 0, parity)
					}
				},
				check: checkMad(func() {
					if err := kp.EncodeIdx(src, 0, parity); err != nil {
						panic(err)
					}
				})},
		)
	}

	// Encode: 32 data shards into one parity shard.
	shards := make([][]byte, encodeK)
	for i := range shards {
		shards[i] = cBytes(encodeSize)
		fill(shards[i])
	}
	parity := cBytes(encodeSize)
	cm, err := gf.Cauchy(1, encodeK)
	if err != nil {
		return nil, err
	}
	coef := cm.Row(0)
	want := make([]byte, encodeSize)
	for i, s := range shards {
		for x, v := range s {
			want[x] ^= gf.Mul8(coef[i], v)
		}
	}
	ie := newIsalEncode(coef, shards, [][]byte{parity})
	kp, err := reedsolomon.New(encodeK, 1, reedsolomon.WithCauchyMatrix(), reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		return nil, fmt.Errorf("klauspost encoder: %w", err)
	}
	all := append(slices.Clone(shards), parity)
	dsts := [][]byte{parity}
	checkEnc := func(one func()) func() error {
		return func() error {
			fill(parity) // garbage first: every implementation must overwrite
			one()
			return diff(parity, want)
		}
	}
	op := fmt.Sprintf("Encode k=%d", encodeK)
	counted := encodeK * encodeSize
	benches = append(benches,
		&bench{op: op, impl: "linerate gf", size: encodeSize, counted: counted,
			run: func(n int) {
				for range n {
					gf.MulMulti(dsts, shards, coef)
				}
			},
			check: checkEnc(func() { gf.MulMulti(dsts, shards, coef) })},
		&bench{op: op, impl: "ISA-L", size: encodeSize, counted: counted,
			run:   func(n int) { ie.run(n, encodeSize) },
			check: checkEnc(func() { ie.run(1, encodeSize) })},
		&bench{op: op, impl: "klauspost", size: encodeSize, counted: counted,
			run: func(n int) {
				for range n {
					_ = kp.Encode(all)
				}
			},
			check: checkEnc(func() {
				if err := kp.Encode(all); err != nil {
					panic(err)
				}
			})},
	)
	return benches, nil
}

func diff(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("byte %d = %#x, want %#x", i, got[i], want[i])
		}
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report prints the table, our ratios, and the goals of issue 5.
func report(w *os.File, benches []*bench) {
	type key struct {
		op   string
		size int
	}
	byImpl := map[key]map[string]*bench{}
	var keys []key
	for _, b := range benches {
		k := key{b.op, b.size}
		if byImpl[k] == nil {
			byImpl[k] = map[string]*bench{}
			keys = append(keys, k)
		}
		byImpl[k][b.impl] = b
	}
	// ratio is the median over rounds of ours/theirs in the same round.
	ratio := func(k key, vs string) float64 {
		ours, theirs := byImpl[k]["linerate gf"].results, byImpl[k][vs].results
		r := make([]float64, len(ours))
		for i := range ours {
			r[i] = ours[i] / theirs[i]
		}
		return median(r)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tsize\timplementation\tGB/s (median)\tbest\t")
	for _, b := range benches {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.2f\t\n", b.op, b.size, b.impl, median(b.results), slices.Max(b.results))
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tsize\tours/ISA-L\tours/klauspost\t")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%d\t%.2f×\t%.2f×\t\n", k.op, k.size, ratio(k, "ISA-L"), ratio(k, "klauspost"))
	}
	tw.Flush()

	fmt.Fprintln(w, "\ngoals (issue 5):")
	goal := func(what string, k key, vs string, want float64) {
		r := ratio(k, vs)
		verdict := "met"
		if r < want {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  %-22s vs %-9s %5.2f× (goal ≥ %.1f×) %s\n", what, vs, r, want, verdict)
	}
	mad := key{"MulAdd", 1408}
	enc := key{fmt.Sprintf("Encode k=%d", encodeK), 1408}
	goal("MulAdd 1408 B", mad, "ISA-L", 1.0)
	goal(enc.op+" 1408 B", enc, "ISA-L", 1.3)
	goal("MulAdd 1408 B", mad, "klauspost", 2.0)
	goal(enc.op+" 1408 B", enc, "klauspost", 2.0)
}
