package main

import (
	"reflect"
	"strings"
	"testing"
)

const sampleOutput = `goos: linux
goarch: amd64
pkg: github.com/linerate/linerate/appliance
cpu: AMD EPYC
BenchmarkForwardMem/engine-2         	   10000	     1300 ns/op	        48.60 Mpps	        20.58 cpu-ns/pkt	        47.10 wall-Mpps	       0 B/op	       0 allocs/op
BenchmarkForwardMem/baseline=alloc-write-swap-free-2 	  200000	      340.5 ns/op	       188.0 Mpps	         5.320 cpu-ns/pkt	       187.9 wall-Mpps	       0 B/op	       0 allocs/op
BenchmarkSomething logs a line that starts like a result
BenchmarkNaN-2   10   1 ns/op   NaN Mpps
BenchmarkOdd-2   10   1 ns/op   5
--- SKIP: BenchmarkVeth-2
    afpacket_linux_test.go:750: needs root
BenchmarkDecoder/k=16/n=1400/loss=10%         	      50	   23000 ns/op	         4.620 GB/s
PASS
ok  	github.com/linerate/linerate/appliance	12.3s
`

func TestParseBench(t *testing.T) {
	lines, skips := parseBench([]byte(sampleOutput), "./x")
	want := []line{
		{Pkg: "github.com/linerate/linerate/appliance", Name: "BenchmarkForwardMem/engine", Iters: 10000,
			Metrics: []metric{{1300, "ns/op"}, {48.6, "Mpps"}, {20.58, "cpu-ns/pkt"}, {47.1, "wall-Mpps"},
				{0, "B/op"}, {0, "allocs/op"}}},
		{Pkg: "github.com/linerate/linerate/appliance", Name: "BenchmarkForwardMem/baseline=alloc-write-swap-free",
			Iters: 200000, Metrics: []metric{{340.5, "ns/op"}, {188, "Mpps"}, {5.32, "cpu-ns/pkt"},
				{187.9, "wall-Mpps"}, {0, "B/op"}, {0, "allocs/op"}}},
		{Pkg: "github.com/linerate/linerate/appliance", Name: "BenchmarkDecoder/k=16/n=1400/loss=10%",
			Iters: 50, Metrics: []metric{{23000, "ns/op"}, {4.62, "GB/s"}}},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines:\n got %+v\nwant %+v", lines, want)
	}
	wantSkips := []skip{{Pkg: "github.com/linerate/linerate/appliance", Name: "BenchmarkVeth", Reason: "needs root"}}
	if !reflect.DeepEqual(skips, wantSkips) {
		t.Errorf("skips: got %+v, want %+v", skips, wantSkips)
	}
}

// TestParseLineRows: what is a result line and what is not.
func TestParseLineRows(t *testing.T) {
	for _, c := range []struct {
		text string
		ok   bool
		name string
	}{
		{"BenchmarkA-2 10 5 ns/op", true, "BenchmarkA"},
		{"BenchmarkA 10 5 ns/op", true, "BenchmarkA"},
		{"BenchmarkA/size=64-16 10 5 ns/op 3 GB/s", true, "BenchmarkA/size=64"},
		{"BenchmarkA-2 10 5", false, ""},             // a value without its unit
		{"BenchmarkA-2 ten 5 ns/op", false, ""},      // iterations not a number
		{"BenchmarkA-2 0 5 ns/op", false, ""},        // no iterations
		{"BenchmarkA-2 10 five ns/op", false, ""},    // a value not a number
		{"BenchmarkA-2 10 +Inf ns/op", false, ""},    // not finite
		{"BenchmarkA-2 10 5 ns/op 1 x 2", false, ""}, // an odd field
		{"Benchmark", false, ""},
		{"", false, ""},
		{"NotABenchmark 10 5 ns/op", false, ""},
	} {
		l, ok := parseLine(c.text)
		if ok != c.ok || l.Name != c.name {
			t.Errorf("%q: got %q %v, want %q %v", c.text, l.Name, ok, c.name, c.ok)
		}
	}
}

// FuzzParseBench: any output parses without a panic, and every result line
// it finds reads back the same from its String: the raw file and -benchfmt
// lose nothing benchstat needs.
func FuzzParseBench(f *testing.F) {
	f.Add([]byte(sampleOutput))
	f.Add([]byte("BenchmarkA-2 10 5 ns/op\n--- SKIP: BenchmarkB\n"))
	f.Add([]byte("pkg: x\nBenchmarkA/routes=1000 1 1e-300 ns/lookup 1e300 GB/s\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		lines, _ := parseBench(out, "p")
		for _, l := range lines {
			back, ok := parseLine(l.String())
			if !ok {
				t.Fatalf("%q does not parse back", l.String())
			}
			back.Pkg = l.Pkg
			if !reflect.DeepEqual(back, l) {
				t.Fatalf("%+v read back as %+v", l, back)
			}
		}
	})
}

func TestSplitSize(t *testing.T) {
	for _, c := range []struct {
		name, path, key string
		size            int64
		ok              bool
	}{
		{"BenchmarkLookup4/traffic=hot/routes=1000", "BenchmarkLookup4/traffic=hot", "routes", 1000, true},
		{"BenchmarkLookup6/routes=16", "BenchmarkLookup6", "routes", 16, true},
		{"BenchmarkReflector/sessions=100000/auth=false", "BenchmarkReflector/auth=false", "sessions", 100000, true},
		{"BenchmarkNeighbor/neighbors=8", "BenchmarkNeighbor", "neighbours", 8, true},
		{"BenchmarkDecoder/generations=10", "BenchmarkDecoder", "generations", 10, true},
		{"BenchmarkA/routes=0", "", "", 0, false},
		{"BenchmarkA/routes=x", "", "", 0, false},
		{"BenchmarkA/size=64", "", "", 0, false},
		{"BenchmarkA/routes=99999999999999999999999", "", "", 0, false},
	} {
		p, k, n, ok := splitSize(c.name)
		if p != c.path || k != c.key || n != c.size || ok != c.ok {
			t.Errorf("%s: got %q %q %d %v", c.name, p, k, n, ok)
		}
	}
}

const gfOutput = `gf level gfni512; all implementations produce identical output

    operation   size  implementation  GB/s (median)    best
       MulAdd   1408     linerate gf          33.96  112.12
       MulAdd   1408           ISA-L          55.90  107.69
  Encode k=32   1408       klauspost          34.35   37.14

    operation   size  ours/ISA-L  ours/klauspost
       MulAdd   1408       1.04×           2.03×

goals (issue 5):
  MulAdd 1408 B          vs ISA-L      1.04× (goal ≥ 1.0×) met
`

const externalOutput = `bench-external: 64-byte frames, bursts of 64, 4000000 packets a run, median of 3; 2 CPUs

case                 Mpps  cores   Mpps/core     p50 lat     p99 lat     vs in  CPU ns/pkt     vs in
in process         32.000      1      32.000           -           -     1.00x        31.2     1.00x
out, saturated     18.240      2       9.120      12.5µs        40µs     0.57x        95.0     3.04x
out, <1% loss      12.480      2       6.240       8.1µs        20µs     0.39x           -         -

added latency out of process: p50 8.1µs, p99 20µs
`

func TestParsePrograms(t *testing.T) {
	gl, err := parseGF([]byte(gfOutput))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range gl {
		got = append(got, l.String())
	}
	want := []string{
		gfName("MulAdd", 1408, "linerate gf") + " 1 33.96 GB/s 112.12 best-GB/s",
		gfName("MulAdd", 1408, "ISA-L") + " 1 55.9 GB/s 107.69 best-GB/s",
		gfName("Encode k=32", 1408, "klauspost") + " 1 34.35 GB/s 37.14 best-GB/s",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bench/gf:\n got %q\nwant %q", got, want)
	}
	el, err := parseExternal([]byte(externalOutput))
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, l := range el {
		got = append(got, l.String())
	}
	want = []string{
		externalName("in process") + " 1 32 Mpps 31.2 cpu-ns/pkt",
		externalName("out, saturated") + " 1 18.24 Mpps 95 cpu-ns/pkt",
		externalName("out, <1% loss") + " 1 12.48 Mpps",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bench/external:\n got %q\nwant %q", got, want)
	}
	for _, n := range want {
		if strings.ContainsAny(strings.Fields(n)[0], " ,") {
			t.Errorf("%q: a name with a space or comma", n)
		}
	}
	if _, err := parseGF([]byte("bench/gf: cannot load libisal\n")); err == nil {
		t.Error("bench/gf output without rows: no error")
	}
	if _, err := parseExternal(nil); err == nil {
		t.Error("bench/external output without rows: no error")
	}
}

func TestParseCPUInfo(t *testing.T) {
	info := "processor\t: 0\nmodel name\t: AMD EPYC 9R45\nflags\t\t: fpu sse ssse3 avx2 gfni avx512f hypervisor\n" +
		"processor\t: 1\nmodel name\t: other\nflags\t\t: avx512bw\n"
	model, flags, vm := parseCPUInfo([]byte(info))
	want := map[string]bool{"gfni": true, "avx512f": true, "avx512bw": false, "avx2": true, "ssse3": true}
	if model != "AMD EPYC 9R45" || !vm || !reflect.DeepEqual(flags, want) {
		t.Errorf("got %q %v %v", model, flags, vm)
	}
}
