package tester

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/linerate/linerate/plugins/builtin"
	_ "github.com/linerate/linerate/ports/mem"
)

// Two directions over an in-memory wire, one IPv4 and one IPv6, with 9000-byte
// frames and small ones: each stream's packets come back on its own rx port,
// nothing is lost, and the NDR is the maximum load.
func TestTwoDirectionsJumbo(t *testing.T) {
	p, err := Parse("two.toml", []byte(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 8192
data_room = 9216
[[ports]]
name = "a"
driver = "mem"
peer = "b"
mtu = 9000
[[ports]]
name = "b"
driver = "mem"
peer = "a"
mtu = 9000
[test]
frame_sizes = [128, 9000]
final_duration = "300ms"
initial_duration = "100ms"
precision = 0.05
max_rate = "4kpps"
warmup = "0s"
drain = "50ms"
latency = [0.5]
latency_duration = "100ms"
[[test.streams]]
name = "east"
tx = "a"
rx = "b"
src = "198.18.0.1"
dst = "198.18.1.1"
flows = 2
[[test.streams]]
name = "west"
tx = "b"
rx = "a"
src = "2001:db8:1::1"
dst = "2001:db8:2::1"
flows = 2
`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := (&Runner{Profile: p}).Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 2 {
		t.Fatalf("%d frame sizes", len(rep.Sizes))
	}
	for _, s := range rep.Sizes {
		sr := s.Searches[0]
		// A wire loses nothing; a tester preempted on a busy machine may
		// fall short of its load, which counts as lost.
		if ndr := sr.Results[0]; ndr.Lower < 0.8*4000 {
			t.Errorf("%s bytes: NDR %.0f pps over a wire, want 4000", s.Name, ndr.Lower)
		}
		last := sr.Trials[len(sr.Trials)-1]
		if len(last.Streams) != 2 {
			t.Fatalf("%d streams in a trial", len(last.Streams))
		}
		for _, st := range last.Streams {
			if st.Received == 0 || st.Received > st.Asked || st.Duplicates != 0 {
				t.Errorf("%s bytes, stream %s: asked %d, received %d, duplicates %d", s.Name, st.Name, st.Asked, st.Received, st.Duplicates)
			}
			// Each stream's own rx port, so each has its own latency.
			if st.Latency == nil {
				t.Errorf("%s bytes, stream %s: no latency", s.Name, st.Name)
			}
		}
		if s.Latency[0].Trial.Latency == nil {
			t.Errorf("%s bytes: no latency at 50%% of the PDR", s.Name)
		}
		// Each direction's latency apart, in report.json's directions.
		d := s.Latency[0].Directions
		if len(d) != 2 || d[0].Stream != "east" || d[0].Tx != "a" || d[0].Rx != "b" || d[1].Stream != "west" ||
			d[1].Tx != "b" || d[1].Rx != "a" || d[0].Latency == nil || d[1].Latency == nil || d[0].Latency.Buckets != nil {
			t.Errorf("%s bytes: latency directions %+v", s.Name, d)
		}
	}
	// And the latency plot has a curve per direction.
	dir := t.TempDir()
	if _, err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "latency.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"128 at 50% PDR, east", "128 at 50% PDR, west", "9000 at 50% PDR, west"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the latency plot has no curve %q", want)
		}
	}
}
