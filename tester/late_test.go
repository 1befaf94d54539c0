package tester

import (
	"fmt"
	"testing"
	"time"
)

// lateProfile is one stream over an in-memory wire (a to b).
const lateProfile = `
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "a"
driver = "mem"
peer = "b"
[[ports]]
name = "b"
driver = "mem"
peer = "a"
# The fake DUT's held-over packets come out on h, towards b.
[[ports]]
name = "h"
driver = "mem"
peer = "b"
[test]
frame_sizes = [128]
final_duration = "200ms"
initial_duration = "100ms"
precision = 0.05
max_rate = "4kpps"
warmup = "0s"
drain = "20ms"
[[test.streams]]
name = "east"
tx = "a"
rx = "b"
src = "198.18.0.1"
dst = "198.18.1.1"
flows = 1
`

// A DUT that held 174 packets of a trial past its drain lets them go at the
// start of the next one: a fake DUT (heldOver, a generator on port h) sends
// them, tagged as the earlier trial's, before the trial's own. The next, low-rate trial's counts are its own: it received what it
// sent, nothing reordered, and the 174 are counted apart as late_from_earlier.
func TestLateFromEarlierTrial(t *testing.T) {
	p, err := Parse("late.toml", []byte(lateProfile))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Profile: p}
	first, err := r.Measure(t.Context(), 128, 2000, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	prev := first.ID
	r.heldOver = fmt.Sprintf(`
[[pipelines]]
name = "held"
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "198.18.0.1"
dst = "198.18.1.1"
udp_dst_port = 20000
sizes = [128]
trial = %d
count = 174
rate = "1Mpps"
[[pipelines.stages]]
kind = "forward"
port = "h"
`, prev)
	tr, err := r.Measure(t.Context(), 128, 3450, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if tr.ID == prev {
		t.Errorf("two trials with id %d", prev)
	}
	s := tr.Streams[0]
	if s.Sent != 690 || s.Received != s.Sent || s.Reordered != 0 || s.Gaps != 0 {
		t.Errorf("sent %d, received %d, reordered %d, gaps %d: want 690 each received, none reordered or missing",
			s.Sent, s.Received, s.Reordered, s.Gaps)
	}
	if s.LateFromEarlier != 174 || tr.LateFromEarlier != 174 {
		t.Errorf("late_from_earlier %d (trial %d), want 174", s.LateFromEarlier, tr.LateFromEarlier)
	}
	if tr.Sent != 690 || tr.Received != 690 {
		t.Errorf("trial: sent %d, received %d, want 690 of 690", tr.Sent, tr.Received)
	}
}
