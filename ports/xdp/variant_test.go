//go:build linux

package xdp

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/testenv"
)

// variant is one way the dispatcher hands its rx stamp up.
type variant struct {
	name  string
	via   stampVia
	needs []kernel.Feature
}

var variants = []variant{
	{"metadata", viaMeta, []kernel.Feature{kernel.KtimeGetNs, kernel.XDPAdjustMeta}},
	{"headroom", viaHead, []kernel.Feature{kernel.KtimeGetNs, kernel.XDPAdjustHead}},
	{"engine", viaNone, nil},
}

// eachVariant runs f as a subtest for each variant, so that the fallbacks
// run on every kernel; one this kernel cannot load is skipped, naming what
// it lacks (under CI too: make test lists it).
func eachVariant(t *testing.T, f func(t *testing.T, v variant)) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			testenv.RequireRoot(t)
			testenv.RequireKernel(t, v.needs...)
			f(t, v)
		})
	}
}

// loadVariant is the plain dispatcher of v, closed when t ends.
func loadVariant(t testing.TB, v variant, walk bool) *dispatcher {
	t.Helper()
	d, err := loadDispatcher(dispatcherConfig{via: v.via, walk: walk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.close() })
	return d
}

// kernelView is what the kernel's stack gets of a frame a run passed:
// BPF_PROG_TEST_RUN's output starts at the metadata area, which is no part
// of the frame.
func kernelView(v variant, out []byte, took bool) []byte {
	if v.via == viaMeta && took {
		return out[lrMetaSize:]
	}
	return out
}

// checkStamp holds the 16 bytes in front of a frame to a dispatcher stamp
// of the kernel's clock, taken in [before, after].
func checkStamp(t testing.TB, what string, b []byte, before, after int64) {
	t.Helper()
	if len(b) < lrMetaSize {
		t.Fatalf("%s: %d bytes, no room for a stamp", what, len(b))
	}
	rx := int64(binary.NativeEndian.Uint64(b))
	src, magic := binary.NativeEndian.Uint32(b[8:]), binary.NativeEndian.Uint32(b[12:])
	if magic != lrMetaMagic || src != lrRxKtime || rx < before || rx > after {
		t.Errorf("%s: stamp % x: rx %d source %d magic %#x, want the kernel's clock in [%d, %d]", what, b[:16], rx,
			src, magic, before, after)
	}
}

// logs is a logger that keeps its lines (text, with their attributes).
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logs) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}

// lines are the lines that contain s.
func (l *logs) lines(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
