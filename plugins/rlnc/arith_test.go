package rlnc

import (
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stagetest"
)

// TestIndependentArithmetic captures a generation as the encoder (systematic
// and coded) and a recoder (fresh combinations with updated coding vectors)
// put it on the wire, and has testdata/check_generation.py recompute every
// coded block with its own table-driven GF(2^8) over 0x11D. The script first
// checks its field against products published by klauspost/reedsolomon,
// Backblaze, ISA-L and Jerasure.
func TestIndependentArithmetic(t *testing.T) {
	_, err := os.Stat("/usr/bin/python3")
	testenv.Require(t, "/usr/bin/python3", err == nil)
	for _, tc := range []struct {
		name string
		k, n int
		keys string
	}{
		{"k=16/n=1400/systematic", 16, 1400, "systematic = true\nrepair_ratio = 0.5\n"},
		{"k=5/n=333/coded", 5, 333, "coded = 8\n"},
		{"k=64/n=200/coded", 64, 200, "coded = 70\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			enc := h.MustBuildNamed("rlnc.encoder", "enc", "k = "+strconv.Itoa(tc.k)+"\nblock = "+strconv.Itoa(tc.n)+"\nmemory = \"4MiB\"\npool_buffers = 1024\n"+tc.keys)
			rec := h.MustBuildNamed("rlnc.recoder", "rec", "memory = \"4MiB\"\npool_buffers = 1024\nrepair_ratio = 0.25\n")
			r := rand.New(rand.NewPCG(11, uint64(tc.k)))
			frames := source(r, tc.k, tc.n)
			h.Run(h.bursts(frames, 0)[0], enc)
			coded := h.produce(enc)
			// The recoder sees every other packet: its output mixes what it holds.
			var half []packet.Handle
			var capture []string
			for i, hd := range coded {
				capture = append(capture, hex.EncodeToString(hd.P().Data()))
				if i%2 == 0 {
					half = append(half, hd)
				} else {
					packet.FreeOne(hd)
				}
			}
			h.through(rec, half)
			recoded := h.produce(rec)
			if len(recoded) == 0 {
				t.Fatal("recoder made nothing")
			}
			for _, hd := range recoded {
				capture = append(capture, hex.EncodeToString(hd.P().Data()))
			}
			stagetest.Free(recoded...)
			var orig []string
			for _, f := range frames {
				orig = append(orig, hex.EncodeToString(f))
			}
			js, _ := json.Marshal(map[string]any{"k": tc.k, "n": tc.n, "originals": orig, "coded": capture})
			path := filepath.Join(t.TempDir(), "generation.json")
			if err := os.WriteFile(path, js, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("/usr/bin/python3", "testdata/check_generation.py", path).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "ok:") {
				t.Fatalf("check_generation.py: %v\n%s", err, out)
			}
			t.Logf("%s", strings.TrimSpace(string(out)))
		})
	}
}
