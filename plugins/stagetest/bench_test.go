package stagetest

import (
	"testing"

	"github.com/linerate/linerate/appliance/packet"

	_ "github.com/linerate/linerate/plugins/builtin" // forward
)

// TestNested: a stage's tables, as a Harness reads its keys, go under the
// stage's own table in InEngine's config file; its keys stay as they are.
func TestNested(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"k = 1", "k = 1"},
		{"k = 1\n[[profiles]]\nname = \"a\"", "k = 1\n[[pipelines.stages.profiles]]\nname = \"a\""},
		{"  [limits]\nx = 2", "[pipelines.stages.limits]\nx = 2"},
		{"list = [1, 2]", "list = [1, 2]"},
	} {
		if got := nested(c.in); got != c.want {
			t.Errorf("nested(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEngineRigAccounts: InEngine's engine, with a stage and without, takes
// every frame its source replays through the mem link to the null ports,
// none dropped, and gives every buffer back: what engine+stage-ns/pkt
// divides by is what went through.
func TestEngineRigAccounts(t *testing.T) {
	frames := [][]byte{make([]byte, 60), make([]byte, 1000)}
	for i := range frames[1] {
		frames[1][i] = byte(i)
	}
	spec := EngineSpec{Kind: "forward", Keys: "port = \"eth1\"\nswap_mac = true", Frames: frames,
		Rx: "st-m1", Ports: []string{"eth1"}}
	for _, with := range []bool{true, false} {
		r := newRig(t, spec, with)
		r.steps(50)
		r.e.Stop()
		s := r.e.Snapshot()
		sent := s.Counter("replay", "sent")
		var out uint64
		for _, p := range s.Ports {
			if p.Driver == "null" {
				out += p.TxPackets
			}
		}
		if sent < 150*packet.MaxBurst || out != sent || len(s.Drops) != 0 {
			t.Errorf("stage %v: replayed %d, %d to the null ports, drops %v", with, sent, out, s.Drops)
		}
		for _, p := range s.Pools {
			if p.InUse != 0 {
				t.Errorf("stage %v: pool %s has %d buffers in use after stop", with, p.Name, p.InUse)
			}
		}
		r.close(t)
	}
}
