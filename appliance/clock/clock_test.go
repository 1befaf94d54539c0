package clock

import (
	"testing"
	"time"
)

// TestTicking: each reading moves the clock on by the next step, in turn;
// Advance and Set move it as a Sim's.
func TestTicking(t *testing.T) {
	c := NewTicking(1000, time.Microsecond, 900*time.Microsecond)
	var got []int64
	for range 4 {
		got = append(got, c.Now())
	}
	want := []int64{1_000, 901_000, 902_000, 1_802_000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("readings %v, want %v", got, want)
		}
	}
	c.Advance(time.Millisecond)
	if now := c.Now(); now != 2_803_000 {
		t.Errorf("after Advance: %d", now)
	}
	if c.UnixOffset() != 1000 || !c.Sync().Synchronized {
		t.Errorf("offset %d, sync %+v", c.UnixOffset(), c.Sync())
	}
	var clk Clock = c
	if a, b := clk.Now(), clk.Now(); b <= a {
		t.Errorf("two readings %d, %d: not moving on", a, b)
	}
}
