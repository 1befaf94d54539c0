package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// newLogger is run's logger: format "text" or "json" ([log] format), at
// level. The two formats carry the same records and attributes.
//
// Under systemd, when stderr is the journal (JOURNAL_STREAM names it), each
// line starts with its syslog priority ("<4>" for a warning), which journald
// takes as the entry's priority, and text records leave out the time, which
// the journal keeps itself.
func newLogger(w io.Writer, format, level string, journal bool) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	if journal && format == "text" {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	mk := func(w io.Writer) slog.Handler {
		if format == "json" {
			return slog.NewJSONHandler(w, opts)
		}
		if format != "text" {
			return nil
		}
		return slog.NewTextHandler(w, opts)
	}
	if mk(io.Discard) == nil {
		return nil, fmt.Errorf("log format %q: use text or json", format)
	}
	if !journal {
		return slog.New(mk(w)), nil
	}
	j := &journalHandler{st: &journalState{out: w}}
	j.inner = mk(&j.st.buf)
	return slog.New(j), nil
}

// onJournal reports whether stderr is the systemd journal's stream:
// JOURNAL_STREAM is "device:inode" of it, and stderr is still that file (a
// child whose stderr was redirected inherits the variable, not the stream).
func onJournal() bool { return onJournalFile(os.Stderr) }

// onJournalFile reports whether f is the journal's stream.
func onJournalFile(f *os.File) bool {
	dev, ino, ok := parseJournalStream(os.Getenv("JOURNAL_STREAM"))
	if !ok {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && st.Ino == ino
}

func parseJournalStream(s string) (dev, ino uint64, ok bool) {
	d, i, found := bytes.Cut([]byte(s), []byte(":"))
	if !found {
		return 0, 0, false
	}
	dev, err1 := strconv.ParseUint(string(d), 10, 64)
	ino, err2 := strconv.ParseUint(string(i), 10, 64)
	return dev, ino, err1 == nil && err2 == nil
}

// journalHandler prefixes each record with its syslog priority, the
// sd-daemon(3) convention journald reads from a service's stderr.
type journalHandler struct {
	inner slog.Handler // writes into st.buf
	st    *journalState
}

type journalState struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

// priority is the syslog priority of a level: err, warning, info, debug.
func priority(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "<3>"
	case l >= slog.LevelWarn:
		return "<4>"
	case l >= slog.LevelInfo:
		return "<6>"
	}
	return "<7>"
}

func (h *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	s := h.st
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	s.buf.WriteString(priority(r.Level))
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	_, err := s.out.Write(s.buf.Bytes())
	return err
}

func (h *journalHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return &journalHandler{inner: h.inner.WithAttrs(a), st: h.st}
}

func (h *journalHandler) WithGroup(g string) slog.Handler {
	return &journalHandler{inner: h.inner.WithGroup(g), st: h.st}
}
