package ioam

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/linerate/linerate/appliance/clock"
)

// golden is testdata/golden.json, written by testdata/golden.py from the RFC
// figures: the options tshark cannot decode (POT, E2E, DEX).
type golden struct {
	POT struct {
		Prime  string `json:"prime"`
		Secret string `json:"secret"`
		Nodes  []struct {
			X           string `json:"x"`
			Share       string `json:"share"`
			PublicShare string `json:"public_share"`
			LPC         string `json:"lpc"`
		} `json:"nodes"`
		Packets []struct {
			Random          string   `json:"random"`
			Cumulative      []string `json:"cumulative"`
			Skipped         string   `json:"skipped_node_2"`
			SkippedVerifies bool     `json:"skipped_verifies"`
			Option          string   `json:"option"`
			Header          string   `json:"header"`
		} `json:"packets"`
	} `json:"pot"`
	E2E []struct {
		Namespace uint16 `json:"namespace"`
		Type      uint16 `json:"type"`
		Seq64     string `json:"seq64"`
		Seq32     uint32 `json:"seq32"`
		Seconds   uint32 `json:"seconds"`
		Fraction  uint32 `json:"fraction"`
		Option    string `json:"option"`
		Header    string `json:"header"`
	} `json:"e2e"`
	DEX []struct {
		Namespace uint16 `json:"namespace"`
		Ext       uint8  `json:"extension_flags"`
		TraceType uint32 `json:"trace_type"`
		FlowID    uint32 `json:"flow_id"`
		Sequence  uint32 `json:"sequence"`
		Option    string `json:"option"`
		Header    string `json:"header"`
	} `json:"dex"`
}

func loadGolden(t *testing.T) *golden {
	t.Helper()
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.POT.Packets) == 0 || len(g.E2E) == 0 || len(g.DEX) == 0 {
		t.Fatal("golden.json is incomplete")
	}
	return &g
}

func u64(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// header wraps an option in an options header the way the stages do.
func header(next uint8, opt []byte) []byte {
	h := make([]byte, freshHeaderLen(len(opt)))
	putFreshHeader(h, next, opt)
	return h
}

func goldenKeys(t *testing.T, g *golden) []POTKey {
	var keys []POTKey
	p := u64(t, g.POT.Prime)
	for _, n := range g.POT.Nodes {
		keys = append(keys, POTKey{Prime: p, X: u64(t, n.X), Share: u64(t, n.Share), PublicShare: u64(t, n.PublicShare), LPC: u64(t, n.LPC)})
	}
	last := &keys[len(keys)-1]
	last.Secret, last.Verifier = u64(t, g.POT.Secret), true
	return keys
}

func TestGoldenPOT(t *testing.T) {
	g := loadGolden(t)
	keys := goldenKeys(t, g)
	for i, pk := range g.POT.Packets {
		rnd := u64(t, pk.Random)
		cml := uint64(0)
		for k := range keys {
			cml = keys[k].Update(rnd, cml)
			if want := u64(t, pk.Cumulative[k]); cml != want {
				t.Fatalf("packet %d node %d: cumulative %#x, Python %#x", i, k, cml, want)
			}
		}
		if !keys[len(keys)-1].Verify(rnd, cml) {
			t.Errorf("packet %d: the full path does not verify", i)
		}
		if keys[len(keys)-1].Verify(rnd, u64(t, pk.Skipped)) != pk.SkippedVerifies || pk.SkippedVerifies {
			t.Errorf("packet %d: a path without node 2 verifies", i)
		}
		body := make([]byte, POTLen)
		POT(body).Encode(123, rnd, cml)
		opt := appendOption(nil, OptionTypeChanging, TypePOT, body)
		if want := unhex(t, pk.Option); !bytes.Equal(opt, want) {
			t.Errorf("packet %d option\n got % x\nwant % x", i, opt, want)
		}
		if want := unhex(t, pk.Header); !bytes.Equal(header(41, opt), want) {
			t.Errorf("packet %d header\n got % x\nwant % x", i, header(41, opt), want)
		}
		o := Option(unhex(t, pk.Option))
		if o.Validate() != nil || o.IOAMType() != TypePOT || POT(o.Body()).Validate() != nil {
			t.Fatalf("packet %d: golden option does not parse", i)
		}
		if p := POT(o.Body()); p.NamespaceID() != 123 || p.POTType() != 0 || p.Random() != rnd || p.Cumulative() != cml {
			t.Errorf("packet %d: parsed %#x %#x", i, p.Random(), p.Cumulative())
		}
	}
}

// The stages with the Python keys: a packet carrying node 0's cumulative
// value crosses nodes 1 and 2 (transits) and 3 (the verifier, decap), which
// ends with Python's value and accepts it; without node 2 it refuses.
func TestGoldenPOTStages(t *testing.T) {
	g := loadGolden(t)
	keys := goldenKeys(t, g)
	dir := t.TempDir()
	var files []string
	for i := range keys {
		f := filepath.Join(dir, fmt.Sprintf("n%d.toml", i))
		if err := WritePOTKey(f, &keys[i]); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	h := newHarness(t)
	potKeys := func(f string) string { return fmt.Sprintf("pot = [ { namespace = 123, key_file = %q } ]\n", f) }
	t1 := h.MustBuild("ioam.transit", nodeKeys(1)+potKeys(files[1]))
	t2 := h.MustBuild("ioam.transit", nodeKeys(2)+potKeys(files[2]))
	dec := h.MustBuild("ioam.decap", nodeKeys(3)+potKeys(files[3])+"export = true\n")
	for _, pk := range g.POT.Packets {
		rnd := u64(t, pk.Random)
		body := make([]byte, POTLen)
		POT(body).Encode(123, rnd, u64(t, pk.Cumulative[0]))
		in := buildFrame(t, frameSpec{ext: [][]byte{header(0, appendOption(nil, OptionTypeChanging, TypePOT, body))}, extTypes: []uint8{0}, payload: 8})
		h.run(in, 0, false, t1, t2, dec)
		h.run(in, 0, false, t1, dec)
	}
	n := len(g.POT.Packets)
	if v, iv := h.Counter("pot_valid"), h.Counter("pot_invalid"); v != uint64(n) || iv != uint64(n) {
		t.Errorf("valid %d invalid %d, want %d each", v, iv, n)
	}
	recs := drainRecords(t, dec)
	for i, pk := range g.POT.Packets {
		r := recs[2*i]
		if r.POTResult != POTValid || r.POTCumulative != u64(t, pk.Cumulative[3]) {
			t.Errorf("packet %d: %d %#x, Python %s", i, r.POTResult, r.POTCumulative, pk.Cumulative[3])
		}
	}
}

func TestGoldenE2E(t *testing.T) {
	g := loadGolden(t)
	for i, v := range g.E2E {
		f := E2EFields{Seq64: u64(t, v.Seq64), Seq32: v.Seq32, Seconds: v.Seconds, Fraction: v.Fraction}
		body := make([]byte, 4+E2EDataLen(v.Type))
		E2E(body).Encode(v.Namespace, v.Type, &f)
		opt := appendOption(nil, OptionTypeStatic, TypeE2E, body)
		if want := unhex(t, v.Option); !bytes.Equal(opt, want) {
			t.Errorf("vector %d option\n got % x\nwant % x", i, opt, want)
		}
		if want := unhex(t, v.Header); !bytes.Equal(header(41, opt), want) {
			t.Errorf("vector %d header\n got % x\nwant % x", i, header(41, opt), want)
		}
		o := Option(unhex(t, v.Option))
		e := E2E(o.Body())
		if o.Validate() != nil || e.Validate() != nil || e.NamespaceID() != v.Namespace || e.E2EType() != v.Type {
			t.Fatalf("vector %d does not parse", i)
		}
		got := e.Fields()
		want := E2EFields{}
		if v.Type&E2ESeq64 != 0 {
			want.Seq64 = f.Seq64
		}
		if v.Type&E2ESeq32 != 0 {
			want.Seq32 = f.Seq32
		}
		if v.Type&E2ESeconds != 0 {
			want.Seconds = f.Seconds
		}
		if v.Type&E2EFraction != 0 {
			want.Fraction = f.Fraction
		}
		if got != want {
			t.Errorf("vector %d parsed %+v, want %+v", i, got, want)
		}
	}
}

func TestGoldenDEX(t *testing.T) {
	g := loadGolden(t)
	for i, v := range g.DEX {
		body := make([]byte, DEXLen(v.Ext))
		DEX(body).Encode(v.Namespace, v.Ext, v.TraceType, v.FlowID, v.Sequence)
		opt := appendOption(nil, OptionTypeStatic, TypeDEX, body)
		if want := unhex(t, v.Option); !bytes.Equal(opt, want) {
			t.Errorf("vector %d option\n got % x\nwant % x", i, opt, want)
		}
		if want := unhex(t, v.Header); !bytes.Equal(header(41, opt), want) {
			t.Errorf("vector %d header\n got % x\nwant % x", i, header(41, opt), want)
		}
		d := DEX(Option(unhex(t, v.Option)).Body())
		if d.Validate() != nil || d.NamespaceID() != v.Namespace || d.ExtensionFlags() != v.Ext || d.TraceType() != v.TraceType {
			t.Fatalf("vector %d does not parse", i)
		}
		if v.Ext&DEXFlowID != 0 && d.FlowID() != v.FlowID || v.Ext&DEXSequence != 0 && d.Sequence() != v.Sequence {
			t.Errorf("vector %d: flow %d seq %d", i, d.FlowID(), d.Sequence())
		}
	}
}

// The encapsulating node writes what Python wrote: the E2E vector of its
// sixth packet, and the DEX vector with sequence 7.
func TestGoldenEncap(t *testing.T) {
	g := loadGolden(t)
	h := newHarness(t)
	// 1700000000.5 s at virtual time testStart.
	h.Clock = clock.NewSim(1700000000*1e9 + 5e8 - testStart)
	h.Clock.Set(testStart)
	h.Ctx.Clock = h.Clock
	enc := h.MustBuild("ioam.encap", `
timestamp = "posix"
mode = "encap"
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
namespaces = [ { id = 123 } ]
[[profiles]]
e2e = { namespace = 123, type = "0xF000" }
dex = { namespace = 123, type = "0xF00000", flow_id = 42, sequence = true }
`)
	pr := enc.(*encap).defaults[0]
	e2e := g.E2E[len(g.E2E)-1]
	dex := g.DEX[0]
	pr.seq = 5
	out := h.run(buildFrame(t, frameSpec{payload: 8}), 0, false, enc).data
	hbh := out[54 : 54+(int(out[55])+1)*8]
	dst := out[54+len(hbh) : 54+len(hbh)+(int(out[55+len(hbh)])+1)*8]
	if want := unhex(t, e2e.Header); !bytes.Equal(dst, want) {
		t.Errorf("E2E header\n got % x\nwant % x", dst, want)
	}
	pr.seq = 7
	out = h.run(buildFrame(t, frameSpec{payload: 8}), 0, false, enc).data
	hbh = out[54 : 54+(int(out[55])+1)*8]
	// The HbH header's next header is the Destination Options header here.
	if want := unhex(t, dex.Header); !bytes.Equal(hbh[1:], want[1:]) || hbh[0] != 60 {
		t.Errorf("DEX header\n got % x\nwant % x", hbh, want)
	}
}
