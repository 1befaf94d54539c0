package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// labRun runs the lab for a second with args, env added, stdout to out,
// and returns what went to stderr.
func labRun(t *testing.T, out io.Writer, env []string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(linerateBin, append([]string{"run", "--duration", "1s", "--live=false"}, args...)...)
	cmd.Env = append(append(os.Environ(), "LINERATE_CONTROL=unix:"+filepath.Join(dir, "ctl.sock")), env...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("linerate run %v: %v\n%s", args, err, errb.String())
	}
	return errb.String()
}

// summaryRecord finds the one record of msg "summary" among log lines and
// checks it carries the summary's fields.
func summaryRecord(t *testing.T, logs string) {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Msg     string
			Level   string
			Summary struct {
				Ports []struct {
					Name      string `json:"name"`
					TxPackets uint64 `json:"tx_packets"`
				} `json:"ports"`
				Generated  uint64 `json:"generated"`
				Histograms []any  `json:"histograms"`
			}
		}
		line := strings.TrimPrefix(sc.Text(), "<6>")
		if !strings.Contains(line, `"msg":"summary"`) {
			continue
		}
		n++
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("the summary record is not JSON: %v\n%s", err, line)
		}
		if r.Level != "INFO" || len(r.Summary.Ports) == 0 || r.Summary.Generated == 0 || len(r.Summary.Histograms) == 0 {
			t.Errorf("the summary record lacks the summary's fields: %s", line)
		}
	}
	if n != 1 {
		t.Errorf("%d summary records, want 1:\n%s", n, logs)
	}
}

// TestSummaryRecord: where the log is JSON, or under systemd, the stop
// summary is one JSON log record with the summary's fields, not ~120 lines
// of text among the records; on a terminal, and elsewhere, it is text.
func TestSummaryRecord(t *testing.T) {
	t.Run("json log", func(t *testing.T) {
		var out bytes.Buffer
		logs := labRun(t, &out, nil, "--log-format", "json")
		if strings.Contains(out.String(), "linerate ran for") || strings.Contains(logs, "linerate ran for") {
			t.Errorf("the text summary is still printed:\n%s", out.String())
		}
		for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
			if !json.Valid([]byte(l)) {
				t.Errorf("a log line that is not JSON: %s", l)
			}
		}
		summaryRecord(t, logs)
		stampRecords(t, logs, out.String())
	})
	t.Run("systemd", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "notify")
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var out bytes.Buffer
		logs := labRun(t, &out, []string{"NOTIFY_SOCKET=" + sock})
		if strings.Contains(out.String(), "linerate ran for") {
			t.Errorf("the text summary is still printed under systemd:\n%s", out.String())
		}
		summaryRecord(t, logs)
		stampRecords(t, logs, out.String())
	})
	t.Run("terminal", func(t *testing.T) {
		pty, tty := openPTY(t)
		got := make(chan string)
		go func() {
			b, _ := io.ReadAll(pty) // until the last close of tty: EIO
			got <- string(b)
		}()
		logs := labRun(t, tty, nil, "--log-format", "json")
		tty.Close()
		out := <-got
		if !strings.Contains(out, "linerate ran for") || strings.Contains(logs, `"msg":"summary"`) {
			t.Errorf("on a terminal the summary is not text:\n%s\nlog:\n%s", out, logs)
		}
	})
	t.Run("text log, no systemd", func(t *testing.T) {
		var out bytes.Buffer
		logs := labRun(t, &out, []string{"NOTIFY_SOCKET=", "JOURNAL_STREAM="})
		if !strings.Contains(out.String(), "linerate ran for") || strings.Contains(logs, `"msg":"summary"`) {
			t.Errorf("the summary is not text:\n%s", out.String())
		}
	})
}

// stampRecords checks that the lab's STAMP report (report = "-") came as
// one record a session, with its metrics, and as no text anywhere.
func stampRecords(t *testing.T, logs, stdout string) {
	t.Helper()
	if strings.Contains(stdout+logs, "STAMP session") && !strings.Contains(logs, `"session":"STAMP session`) {
		t.Errorf("the STAMP report is text:\n%s", stdout+logs)
	}
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		l = strings.TrimPrefix(l, "<6>")
		if !strings.Contains(l, `"msg":"stamp report"`) {
			continue
		}
		n++
		var r struct {
			Session string
			Metrics struct {
				Sent string `json:"sent"`
			}
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Session == "" || r.Metrics.Sent == "" {
			t.Errorf("a STAMP record without its session and metrics (%v): %s", err, l)
		}
	}
	if n == 0 {
		t.Errorf("no STAMP report record:\n%s", logs)
	}
}

// TestLiveLineAlone: on a terminal, with the live line on, nothing is
// written onto the live line: the log's lines and the lab's STAMP report
// (on stdout, the same terminal) each erase it first. The live line used to
// get the report's first line glued to it (177 columns).
func TestLiveLineAlone(t *testing.T) {
	pty, tty := openPTY(t)
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(pty)
		got <- string(b)
	}()
	cmd := exec.Command(linerateBin, "run", "--duration", "4s", "--live")
	cmd.Env = append(os.Environ(), "LINERATE_CONTROL=unix:"+filepath.Join(t.TempDir(), "ctl.sock"),
		"NOTIFY_SOCKET=", "JOURNAL_STREAM=")
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	out := <-got
	const live, erase = "Gbit/s  processed", "\r\033[K"
	if !strings.Contains(out, erase) || !strings.Contains(out, "STAMP session") {
		t.Fatalf("no live line or no STAMP report in 4 s:\n%q", out)
	}
	// Each write after a live line starts by erasing it: a live line is
	// followed by another live line or by an erase, never by text.
	for _, seg := range strings.Split(out, erase)[1:] {
		if i := strings.IndexAny(seg, "\r\n"); i >= 0 && strings.Contains(seg[:i], live) {
			t.Errorf("text glued onto the live line: %q", seg[:min(len(seg), 240)])
		}
	}
}

// openPTY opens a pseudo-terminal: its master, and the terminal.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
