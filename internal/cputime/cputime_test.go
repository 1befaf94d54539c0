package cputime

import (
	"runtime"
	"testing"
	"time"
)

// TestThread: a busy loop's CPU time advances (however often a loaded
// machine preempts it), and a sleep's does not.
func TestThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, w0 := Thread(), time.Now()
	for Thread()-c0 < 10*time.Millisecond {
		if time.Since(w0) > 10*time.Second {
			t.Fatalf("10 s of spinning counted %v of CPU", Thread()-c0)
		}
	}
	c1 := Thread()
	time.Sleep(20 * time.Millisecond)
	if slept := Thread() - c1; slept > 5*time.Millisecond {
		t.Errorf("20 ms of sleep counted %v of CPU", slept)
	}
}

// TestShare: the share is 1 until a stretch of 1024 calls ends; a stretch
// the thread mostly slept through then scales wall time down.
func TestShare(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := NewShare()
	for i := range 1023 {
		if got := s.Scale(time.Microsecond); got != time.Microsecond {
			t.Fatalf("call %d: scaled 1µs to %v before the first stretch ended", i, got)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if got := s.Scale(time.Millisecond); got > time.Millisecond/2 {
		t.Errorf("after a stretch spent asleep, 1ms scaled to %v", got)
	}
}
