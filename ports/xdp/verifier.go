//go:build linux

package xdp

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
)

// bpfLoadError is a BPF program the kernel refused, in one line for the
// user: what was loaded, the kernel's last words, and where the verifier's
// whole log went. The log is for developers: it never goes into the error
// or an Info or Warn line (it runs to hundreds of lines).
type bpfLoadError struct {
	what string // "load the XDP dispatcher"
	line string // the refusal, one line
	file string // the verifier's log; "" when it could not be written
	err  error
}

func (e *bpfLoadError) Error() string {
	s := e.what + ": " + e.line
	if e.file != "" {
		s += " (the verifier's log: " + e.file + ")"
	}
	return s
}

func (e *bpfLoadError) Unwrap() error { return e.err }

var omitted = regexp.MustCompile(` \(\d+ line\(s\) omitted\)`)

// loadFailed is err, from loading a BPF program (what: "load the XDP
// dispatcher"), as one line. A verifier's log goes to log at Debug
// (--log-level debug) and into a new file in os.TempDir(), named after tag
// (the port), which the line names. appliance/offload could use it too.
func loadFailed(log *slog.Logger, what, tag string, err error) error {
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %s", what, flat(err.Error()))
	}
	// cilium/ebpf's Error is the cause and the log's last meaningful line.
	e := &bpfLoadError{what: what, line: flat(omitted.ReplaceAllString(err.Error(), "")), err: err}
	if log != nil {
		log.Debug("the verifier's log", "program", what, "log", strings.Join(ve.Log, "\n"))
	}
	f, ferr := writeVerifierLog(tag, what, e.line, ve.Log)
	if ferr == nil {
		e.file = f
	} else if log != nil {
		log.Debug("the verifier's log not kept", "err", ferr)
	}
	return e
}

// writeVerifierLog writes the log to a file of its own: os.CreateTemp opens
// it with O_EXCL and mode 0600, so that a symlink planted in /tmp cannot
// redirect it.
func writeVerifierLog(tag, what, line string, log []string) (string, error) {
	name := "linerate-verifier-" + safeName(tag) + fmt.Sprintf("-%d-*.log", os.Getpid())
	f, err := os.CreateTemp("", name)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n\n", what, line)
	for _, l := range log {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// safeName keeps a file name's tag to letters, digits, '-', '_' and '.'.
func safeName(s string) string {
	if s == "" {
		s = "xdp"
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// flat is s on one line.
func flat(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
