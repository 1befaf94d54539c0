package stamp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
)

// manySenders adds n started sender sessions to stage "tx" in one swap;
// session id sends every (1 + id%7) · 10 ms.
func manySenders(t *testing.T, h *harness, n int) []*txSession {
	t.Helper()
	reg := h.registry()
	d := reg.senders["tx"].defaults
	ss := make([]*txSession, n)
	for id := 1; id <= n; id++ {
		c := SenderSession{SSID: uint16(id), Stage: "tx", Reflector: addrR,
			Interval: time.Duration(1+id%7) * 10 * time.Millisecond, Records: 1}
		s, err := buildTx(c, &d)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		ss[id-1] = s
	}
	if i, err := reg.putTxs(ss); err != nil {
		t.Fatalf("session %d: %v", i, err)
	}
	return ss
}

// TestSenderManySessions runs 5000 sessions (more than the 4096 the
// registry took before) at 7 rates on one lcore, in virtual time: every
// session sends exactly the packets its own schedule has due, in sequence,
// whichever order the due-time heap visits them in. Then sessions stop and
// start through the control path, as the heap must notice.
func TestSenderManySessions(t *testing.T) {
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", fmt.Sprintf("src = %q\n", addrS)).(*sender)
	const n = 5000
	ss := manySenders(t, h, n)
	start := h.Clock.Now()
	got := make([]uint32, n+1) // packets per SSID, each checked in sequence
	// poll produces until nothing more is due at this time: a burst holds
	// 64 packets, and many sessions fall due together.
	poll := func() {
		for {
			fs := h.produce(snd)
			for _, f := range fs {
				pay, _ := payloadOf(t, f)
				id := binary.BigEndian.Uint16(pay[14:])
				if seq := binary.BigEndian.Uint32(pay); seq != got[id] {
					t.Fatalf("SSID %d: sequence %d, want %d", id, seq, got[id])
				}
				got[id]++
			}
			if len(fs) < packet.MaxBurst {
				return
			}
		}
	}
	const span = 200 * time.Millisecond
	for h.Clock.Now() < start+int64(span) {
		poll()
		h.advance(100 * time.Microsecond)
	}
	poll() // at start+span exactly
	for _, s := range ss {
		iv := int64(s.interval)
		if want := uint32(int64(span)/iv + 1); got[s.id] != want {
			t.Fatalf("SSID %d (every %v): %d packets, want %d", s.id, s.cfg.Interval, got[s.id], want)
		}
	}
	if late := h.StageCounter("tx", "late"); late != 0 {
		t.Fatalf("%d late", late)
	}
	// Stop one and start it again: a new run, sequence from 0, due now.
	reg := h.registry()
	if _, err := reg.stopTx(42); err != nil {
		t.Fatal(err)
	}
	h.advance(100 * time.Millisecond)
	before := got[42]
	poll()
	if got[42] != before {
		t.Fatalf("SSID 42 sent %d packets stopped", got[42]-before)
	}
	if _, err := reg.startTx(42); err != nil {
		t.Fatal(err)
	}
	got[42] = 0 // a new run restarts the sequence
	h.advance(100 * time.Microsecond)
	poll()
	if got[42] != 1 {
		t.Fatalf("SSID 42 sent %d packets on its restart, want 1", got[42])
	}
}

// TestSenderDueAllocs: a poll with due sessions among 5000 allocates
// nothing.
func TestSenderDueAllocs(t *testing.T) {
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", fmt.Sprintf("src = %q\n", addrS)).(*sender)
	manySenders(t, h, 5000)
	b := &packet.Burst{}
	poll := func() {
		h.advance(20 * time.Microsecond)
		h.Ctx.Now = h.Clock.Now()
		snd.Produce(&h.Ctx, b)
		packet.Free(b)
	}
	for range 2000 { // past the start, when every session is due at once
		poll()
	}
	sent := h.StageCounter("tx", "sent")
	if a := testing.AllocsPerRun(500, poll); a != 0 {
		t.Fatalf("%v allocations a poll", a)
	}
	if h.StageCounter("tx", "sent") == sent {
		t.Fatal("nothing was due: the test measured idle polls")
	}
}

// TestDueHeap checks the heap against a sorted order.
func TestDueHeap(t *testing.T) {
	var h dueHeap
	ss := make([]txSession, 100)
	for i := range ss {
		h = append(h, dueEntry{next: int64((i * 37) % 100), s: &ss[i]})
	}
	h.init()
	h.push(dueEntry{next: -1})
	prev := int64(-2)
	for len(h) > 0 {
		if h[0].next < prev {
			t.Fatalf("%d after %d", h[0].next, prev)
		}
		prev = h[0].next
		h.pop0()
	}
	if prev != 99 {
		t.Fatalf("last %d", prev)
	}
}

// TestConfigSessionsOneSwap: a config file's sessions go into the table at
// once, all or none; a duplicate SSID names the session at fault, and the
// table keeps none of them.
func TestConfigSessionsOneSwap(t *testing.T) {
	h := newHarness(t)
	var sb strings.Builder
	fmt.Fprintf(&sb, "rate_limit = \"0\"\n")
	for _, id := range []int{5, 6, 300, 6} {
		fmt.Fprintf(&sb, "[[sessions]]\nssid = %d\n", id)
	}
	_, err := h.BuildNamed("stamp.reflector", "refl", sb.String())
	if err == nil || !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "sessions[3]") {
		t.Fatalf("err = %v, want sessions[3]: SSID 6 exists", err)
	}
	if s := h.registry().rf.Load().get(5); s != nil {
		t.Fatal("session 5 of a refused config is in the table")
	}
	h2 := newHarness(t)
	h2.MustBuildNamed("stamp.reflector", "refl", "rate_limit = \"0\"\n[[sessions]]\nssid = 300\n[[sessions]]\nssid = 65535\n")
	tab := h2.registry().rf.Load()
	for _, id := range []uint16{300, 65535} {
		if s := tab.get(id); s == nil || s.id != id {
			t.Fatalf("SSID %d not found", id)
		}
	}
	for _, id := range []uint16{1, 299, 301, 556, 65534} {
		if tab.get(id) != nil {
			t.Fatalf("SSID %d found", id)
		}
	}
}

// TestTablePages: the paged lookup agrees with the map through adds and
// removals, including the last SSID of a page and of the space.
func TestTablePages(t *testing.T) {
	r := newRegistry()
	ids := []uint16{1, 255, 256, 257, 511, 4096, 65535}
	for _, id := range ids {
		if err := r.putRf(&rfSession{id: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.dropRf(256); err != nil {
		t.Fatal(err)
	}
	tab := r.rf.Load()
	for id := 0; id <= 65535; id++ {
		s := tab.get(uint16(id))
		if m := tab.m[uint16(id)]; s != m {
			t.Fatalf("SSID %d: pages %p, map %p", id, s, m)
		}
	}
	if got := len(r.rfSessions()); got != len(ids)-1 {
		t.Fatalf("%d sessions", got)
	}
}
