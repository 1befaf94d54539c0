package rlnc

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/internal/tshark"
	"github.com/linerate/linerate/plugins/stagetest"
)

// TestTsharkDissector: docs/wireshark/codedip.lua, loaded into tshark with
// -X lua_script, decodes what the encoder sends (systematic, coded, flushed
// short) field by field, and flags each kind of malformed header.
func TestTsharkDissector(t *testing.T) {
	tshark.Require(t)
	script, err := filepath.Abs("../../docs/wireshark/codedip.lua")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	enc := h.MustBuildNamed("rlnc.encoder", "enc", `k = 4
block = 120
systematic = true
repair_ratio = 0.5
flush = "1ms"
session_length = 9
memory = "1MiB"
pool_buffers = 64
[[match]]
session = 42
`)
	r := rand.New(rand.NewPCG(4, 4))
	h.Run(h.bursts(source(r, 6, 120), 0)[0], enc) // one generation of 4, then 2 more
	h.Clock.Advance(2 * time.Millisecond)
	h.Tick(enc)
	out := h.produce(enc)
	var frames [][]byte
	var want []Fields
	for _, hd := range out {
		frames = append(frames, append([]byte(nil), hd.P().Data()...))
		f := codedHeader(t, hd).Fields()
		f.Vector = slices.Clone(f.Vector) // it aliases the buffer, freed below
		want = append(want, f)
	}
	stagetest.Free(out...)
	// 4 systematic + 2 repair, then 2 systematic + 1 repair with k′ = 2.
	if len(frames) != 9 {
		t.Fatalf("encoder sent %d packets, want 9", len(frames))
	}
	blk := make([]byte, 16)
	zero := goodFields(7, 3, []byte{0, 0, 0})
	badLen := goodFields(7, 3, []byte{1, 2, 3})
	badLen.BlockLen = 20
	zeroK := goodFields(7, 3, nil)
	zeroK.K = 0
	sysBad := goodFields(7, 3, []byte{1, 1, 0})
	sysBad.Flags = FlagSystematic
	malformed := map[string][]byte{
		"codedip.zero_vector":    codedFrame(testSrc, testDst, zero, blk),
		"codedip.bad_length":     codedFrame(testSrc, testDst, badLen, blk),
		"codedip.zero_k":         codedFrame(testSrc, testDst, zeroK, blk),
		"codedip.bad_systematic": codedFrame(testSrc, testDst, sysBad, blk),
	}
	expertAt := map[string]int{}
	for _, name := range []string{"codedip.zero_vector", "codedip.bad_length", "codedip.zero_k", "codedip.bad_systematic"} {
		frames = append(frames, malformed[name])
		expertAt[name] = len(frames)
	}
	path := filepath.Join(t.TempDir(), "codedip.pcap")
	tshark.WritePcap(t, path, frames)

	fields := []string{"codedip.nh", "codedip.session_id", "codedip.session_len", "codedip.gen_id", "codedip.k",
		"codedip.version", "codedip.field", "codedip.block_len", "codedip.flags.systematic", "codedip.k_used", "codedip.vector",
		"codedip.src_index"}
	args := []string{"-X", "lua_script:" + script, "-r", path, "-T", "fields", "-E", "separator=|"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	raw := tshark.Run(t, args...)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var rows []string
	for _, l := range lines {
		if strings.Count(l, "|") == len(fields)-1 {
			rows = append(rows, l)
		}
	}
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames:\n%s", len(rows), len(frames), raw)
	}
	for i, w := range want {
		got := strings.Split(rows[i], "|")
		sys, src := "0", ""
		if w.Flags&FlagSystematic != 0 {
			sys = "1"
			for j, c := range w.Vector {
				if c == 1 {
					src = fmt.Sprint(j)
				}
			}
		}
		exp := []string{fmt.Sprint(w.NextHeader), fmt.Sprint(w.SessionID), fmt.Sprint(w.SessionLength), fmt.Sprint(w.GenerationID),
			fmt.Sprint(w.K), "1", "0", fmt.Sprint(w.BlockLen), sys, fmt.Sprint(w.BlocksUsed), hex.EncodeToString(w.Vector), src}
		for j := range fields {
			g := got[j]
			if fields[j] == "codedip.vector" {
				g = strings.ReplaceAll(g, ":", "")
			}
			if fields[j] == "codedip.flags.systematic" && g == "True" {
				g = "1"
			} else if fields[j] == "codedip.flags.systematic" && g == "False" {
				g = "0"
			}
			if g != exp[j] {
				t.Errorf("frame %d %s: tshark %q, encoder wrote %q", i+1, fields[j], got[j], exp[j])
			}
		}
	}
	if want[6].BlocksUsed != 0 || want[8].BlocksUsed != 2 || want[8].GenerationID != 1 {
		t.Errorf("the flushed generation: %+v", want[8])
	}

	// Good packets raise no expert info; each malformed one raises its own.
	for name, frame := range expertAt {
		raw := tshark.Run(t, "-X", "lua_script:"+script, "-r", path, "-Y", name, "-T", "fields", "-e", "frame.number")
		if got := strings.TrimSpace(string(raw)); got != fmt.Sprint(frame) {
			t.Errorf("-Y %s matched frames %q, want %d", name, raw, frame)
		}
	}
	raw = tshark.Run(t, "-X", "lua_script:"+script, "-r", path, "-Y", "_ws.expert", "-T", "fields", "-e", "frame.number")
	if got := strings.Fields(string(raw)); strings.Join(got, ",") != "10,11,12,13" {
		t.Errorf("expert info on frames %v, want only the 4 malformed ones (10..13)", got)
	}
}
