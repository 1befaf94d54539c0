//go:build lrcheck

package appliance_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/plugins"
)

// freeAndKeep frees every packet it sees but leaves it in the burst: the
// engine would read a verdict from, and forward, a buffer it gave back.
type freeAndKeep struct{}

func (freeAndKeep) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		ctx.Env.Free(b.H[i])
	}
}

var registerFreeAndKeep sync.Once

// TestCheckedNamesTheStage: in a checked build, a stage that frees a packet
// and leaves it in the burst stops the engine with a report that names the
// buffer, its owner and the stage.
func TestCheckedNamesTheStage(t *testing.T) {
	registerFreeAndKeep.Do(func() {
		plugins.Register(plugins.Kind{Name: "test.free_and_keep", Summary: "test", New: func(s *plugins.Setup) (plugins.Stage, error) {
			return freeAndKeep{}, s.Config.Decode(&struct{}{})
		}})
	})
	e := enginetest.Start(t, `
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "out"
driver = "null"
[[pipelines]]
name = "buggy"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 6
src = "2001:db8::1"
dst = "2001:db8::2"
count = 10
[[pipelines.stages]]
kind = "test.free_and_keep"
name = "culprit"
[[pipelines.stages]]
kind = "forward"
port = "out"
`, appliance.Options{Manual: true})
	var oe *packet.OwnershipError
	func() {
		defer func() {
			if r := recover(); r != nil {
				if err, ok := r.(error); !ok || !errors.As(err, &oe) {
					panic(r)
				}
			}
		}()
		e.Step()
	}()
	if oe == nil {
		t.Fatal("the engine forwarded packets a stage had freed")
	}
	msg := oe.Error()
	for _, want := range []string{"a stage freed a packet and left it in the burst", "last owned by lcore 0 at stage 1",
		`pipeline "buggy" stage 1 "culprit" (test.free_and_keep)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("report %q lacks %q", msg, want)
		}
	}
}
