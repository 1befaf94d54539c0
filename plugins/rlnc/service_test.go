package rlnc_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/plugins/rlnc/api"
)

const serviceConfig = `version = 1
[engine]
pin = false
[control]
listen = ""
[[pipelines]]
name = "p"
[[pipelines.stages]]
kind = "generator"
src = "2001:db8:1::1"
dst = "2001:db8:2::1"
sizes = [200]
count = 12
[[pipelines.stages]]
kind = "rlnc.encoder"
name = "enc"
k = 8
block = 200
flush = "10s"
memory = "1MiB"
pool_buffers = 256
match = [ { session = 5 } ]
[[pipelines.stages]]
kind = "rlnc.recoder"
name = "rec"
memory = "1MiB"
pool_buffers = 256
[[pipelines.stages]]
kind = "rlnc.decoder"
name = "dec"
memory = "1MiB"
pool_buffers = 1024
[[pipelines.stages]]
kind = "sink"
name = "sink"
`

// TestService lists sessions and generations through the control API and
// flushes a session: the encoder sends its open generation short, and the
// decoder delivers it.
func TestService(t *testing.T) {
	e := enginetest.Start(t, serviceConfig, appliance.Options{Manual: true})
	for i := 0; i < 100; i++ {
		e.Step()
	}
	conn := enginetest.Dial(t, e)
	cl := api.NewRlncClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ls, err := cl.ListRlncSessions(ctx, &api.ListRlncSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Stages) != 3 {
		t.Fatalf("%d stages", len(ls.Stages))
	}
	src := netip.MustParseAddr("2001:db8:1::1").As16()
	for _, st := range ls.Stages {
		if len(st.Sessions) != 1 || st.Store.Sessions != 1 || st.Store.MaxGenerations != 1024 {
			t.Fatalf("%s: %v", st.Stage, st)
		}
		s := st.Sessions[0]
		if s.SessionId != 5 || s.NextHeader != 17 || string(s.Src) != string(src[:]) {
			t.Errorf("%s session %v", st.Stage, s)
		}
		switch st.Kind {
		case "rlnc.encoder":
			if s.Packets != 12 || s.Finished != 1 || s.NewestGeneration != 2 || st.Store.BlocksUsed != 4 {
				t.Errorf("encoder: %v store %v", s, st.Store)
			}
		case "rlnc.decoder":
			if s.Finished != 1 {
				t.Errorf("decoder finished %d generations, want 1", s.Finished)
			}
		}
	}
	gs, err := cl.ListRlncGenerations(ctx, &api.ListRlncGenerationsRequest{Filter: &api.RlncSessionFilter{Stage: "enc"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs.Stages) != 1 || len(gs.Stages[0].Generations) != 1 {
		t.Fatalf("encoder generations: %v", gs)
	}
	if g := gs.Stages[0].Generations[0]; g.GenerationId != 1 || g.Rank != 4 || g.K != 8 || g.BlockLen != 200 {
		t.Errorf("open generation %v", g)
	}
	if _, err := cl.ListRlncSessions(ctx, &api.ListRlncSessionsRequest{Filter: &api.RlncSessionFilter{Src: []byte{1, 2}}}); err == nil {
		t.Error("a 2-byte src was accepted")
	}
	other := uint32(6)
	fr, err := cl.FlushRlncSessions(ctx, &api.FlushRlncSessionsRequest{Filter: &api.RlncSessionFilter{SessionId: &other}})
	if err != nil || fr.Flushed != 0 {
		t.Fatalf("flush of session 6: %v %v", fr, err)
	}
	five := uint32(5)
	fr, err = cl.FlushRlncSessions(ctx, &api.FlushRlncSessionsRequest{Filter: &api.RlncSessionFilter{Stage: "enc", SessionId: &five}})
	if err != nil || fr.Flushed != 1 {
		t.Fatalf("flush: %v %v", fr, err)
	}
	for i := 0; i < 100; i++ {
		e.Step()
	}
	var received uint64
	for _, st := range e.Snapshot().Stages {
		if st.Name == "sink" {
			for _, c := range st.Counters {
				if c.Name == "received" {
					received = c.Value
				}
			}
		}
	}
	if received != 12 {
		t.Errorf("sink received %d of 12 after the flush", received)
	}
}
