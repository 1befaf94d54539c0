package appliance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLimited wraps a logger so that an lcore's messages cannot flood the log:
// at most logBurst records per logWindow per logger, then one summary of how many
// were suppressed.
func rateLimited(l *slog.Logger) *slog.Logger {
	return slog.New(&limitHandler{Handler: l.Handler(), st: &limitState{}})
}

const (
	logBurst  = 10
	logWindow = time.Second
)

type limitState struct {
	mu         sync.Mutex
	start      time.Time
	n          int
	suppressed int
}

type limitHandler struct {
	slog.Handler
	st *limitState
}

func (h *limitHandler) Handle(ctx context.Context, r slog.Record) error {
	s := h.st
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.start) >= logWindow {
		if s.suppressed > 0 {
			sum := slog.NewRecord(now, slog.LevelWarn, "log messages suppressed", 0)
			sum.AddAttrs(slog.Int("count", s.suppressed))
			s.suppressed = 0
			s.mu.Unlock()
			_ = h.Handler.Handle(ctx, sum)
			s.mu.Lock()
		}
		s.start, s.n = now, 0
	}
	s.n++
	if s.n > logBurst {
		s.suppressed++
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *limitHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return &limitHandler{Handler: h.Handler.WithAttrs(a), st: h.st}
}

func (h *limitHandler) WithGroup(g string) slog.Handler {
	return &limitHandler{Handler: h.Handler.WithGroup(g), st: h.st}
}
