// Package enginetest builds engines from TOML for tests, serves their control
// API, steps them in virtual time and reads their stats. Engines are closed,
// and servers stopped, when the test ends.
package enginetest

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
)

// Quiet is a logger that writes nothing.
var Quiet = slog.New(slog.DiscardHandler)

// New parses toml and builds an engine with o (logging to Quiet unless o.Log
// is set). The test fails on an error; the engine is closed, and must close
// cleanly, when the test ends.
func New(t testing.TB, toml string, o appliance.Options) *appliance.Engine {
	t.Helper()
	cfg, err := config.Parse("test.toml", []byte(toml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return Build(t, cfg, o)
}

// Build is New for a parsed config.
func Build(t testing.TB, cfg *config.File, o appliance.Options) *appliance.Engine {
	t.Helper()
	if o.Log == nil {
		o.Log = Quiet
	}
	e, err := appliance.New(cfg, o)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close engine: %v", err)
		}
	})
	return e
}

// Start is New, then Start.
func Start(t testing.TB, toml string, o appliance.Options) *appliance.Engine {
	t.Helper()
	e := New(t, toml, o)
	if err := e.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	return e
}

// Serve serves e's control API, as the binary does, on a unix socket of the
// test's own, and returns the address to dial ("unix:…").
func Serve(t testing.TB, e *appliance.Engine) string {
	t.Helper()
	srv := control.NewServer(e, Quiet)
	srv.RegisterServices(control.Host(e))
	addr := "unix:" + filepath.Join(t.TempDir(), "ctl.sock")
	if _, err := srv.Start(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return addr
}

// Dial serves e's control API and connects to it.
func Dial(t testing.TB, e *appliance.Engine) *grpc.ClientConn {
	t.Helper()
	cc, err := control.Dial(Serve(t, e))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Run steps a manual engine through d of virtual time, advancing clk by step
// before each step.
func Run(e *appliance.Engine, clk *clock.Sim, d, step time.Duration) {
	end := clk.Now() + int64(d)
	for clk.Now() < end {
		clk.Advance(step)
		e.Step()
	}
}

// Counter sums the counter called name over every instance of the stage
// called stage in s.
func Counter(s *stats.Snapshot, stage, name string) uint64 { return s.Counter(stage, name) }
