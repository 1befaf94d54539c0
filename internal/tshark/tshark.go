// Package tshark checks frames with Wireshark's dissectors for interop tests:
// it writes them to a pcap file and runs tshark on it.
package tshark

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// Require requires tshark on PATH (see testenv.Require).
func Require(t testing.TB) {
	t.Helper()
	testenv.RequireCmd(t, "tshark")
}

// WritePcap writes frames to a classic pcap file at path: Ethernet, one
// microsecond apart from 2023-11-14 22:13:20 UTC.
func WritePcap(t testing.TB, path string, frames [][]byte) {
	t.Helper()
	var b bytes.Buffer
	le := binary.LittleEndian
	hdr := make([]byte, 24)
	le.PutUint32(hdr[0:], 0xa1b2c3d4) // microsecond timestamps
	le.PutUint16(hdr[4:], 2)          // version 2.4
	le.PutUint16(hdr[6:], 4)
	le.PutUint32(hdr[16:], 65535) // snap length
	le.PutUint32(hdr[20:], 1)     // LINKTYPE_ETHERNET
	b.Write(hdr)
	for i, f := range frames {
		rec := make([]byte, 16)
		le.PutUint32(rec[0:], 1700000000)
		le.PutUint32(rec[4:], uint32(i))
		le.PutUint32(rec[8:], uint32(len(f)))
		le.PutUint32(rec[12:], uint32(len(f)))
		b.Write(rec)
		b.Write(f)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Run runs tshark with args, in UTC and with a home of the test's own, and
// returns what it printed. Its standard error (tshark warns when run as root)
// goes only into the failure message.
func Run(t testing.TB, args ...string) []byte {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(testenv.RequireCmd(t, "tshark"), args...)
	cmd.Env = append(os.Environ(), "TZ=UTC", "HOME="+t.TempDir())
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}
