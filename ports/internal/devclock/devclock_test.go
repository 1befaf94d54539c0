//go:build linux

package devclock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func read(id int32) int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(id, &ts)
	return ts.Nano()
}

// Two real clocks stand in for a device and the engine: CLOCK_REALTIME,
// which NTP may slew and which is offset by the epoch, against
// CLOCK_MONOTONIC_RAW. A device read made after the map maps to the engine
// clock read around it.
func TestFollow(t *testing.T) {
	dev := func() (int64, error) { return read(unix.CLOCK_REALTIME), nil }
	mono := func() int64 { return read(unix.CLOCK_MONOTONIC_RAW) }
	var m *Map
	for i := 0; i < 10; i++ {
		p, err := Read(dev, mono)
		if err != nil {
			t.Fatal(err)
		}
		m = Next(m, p, 1)
		time.Sleep(5 * time.Millisecond)
	}
	if m.Readings() != 10 {
		t.Errorf("%d readings kept", m.Readings())
	}
	time.Sleep(20 * time.Millisecond)
	var worst int64
	for i := 0; i < 50; i++ {
		m0 := mono()
		d, _ := dev()
		m1 := mono()
		if e := max(m0-m.Mono(d), m.Mono(d)-m1, 0); e > worst {
			worst = e
		}
	}
	t.Logf("rate %.9f; worst error outside the reads' bracket %v", m.Rate, time.Duration(worst))
	if worst > int64(20*time.Microsecond) || m.Rate < 0.999 || m.Rate > 1.001 {
		t.Errorf("mapping off by %v (rate %.9f)", time.Duration(worst), m.Rate)
	}
}

// A device that counts at its own rate: the map finds it, and keeps only
// Baseline of readings.
func TestRateAndBaseline(t *testing.T) {
	var m *Map
	for i := int64(0); i <= 40; i++ {
		mono := i * int64(time.Second/2)
		m = Next(m, Point{Dev: 1000 + mono*3, Mono: mono}, 1) // 3 ticks a ns
	}
	if m.Rate < 1.0/3-1e-12 || m.Rate > 1.0/3+1e-12 {
		t.Errorf("rate %.12f, want 1/3", m.Rate)
	}
	if want := int(Baseline/(time.Second/2)) + 1; m.Readings() != want {
		t.Errorf("%d readings, want %d", m.Readings(), want)
	}
	if got := m.Mono(1000 + 3*int64(25*time.Second)); got != int64(25*time.Second) {
		t.Errorf("maps to %d", got)
	}
	if one := Next(nil, Point{Dev: 5, Mono: 7}, 2); one.Mono(15) != 27 {
		t.Errorf("first map uses the guess: %d", one.Mono(15))
	}
}
