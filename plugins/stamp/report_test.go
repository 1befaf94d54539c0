package stamp

import (
	"strings"
	"testing"
	"unicode/utf8"

	clitable "github.com/linerate/linerate/appliance/cli/table"
)

// TestReportMinMean: the report gives each delay's minimum and mean first,
// then its percentiles and maximum, and fits 100 columns with a loaded
// lab's figures.
func TestReportMinMean(t *testing.T) {
	d := func(min, mean, p50, max int64) DelayStats {
		return DelayStats{N: 9731, Min: min, Mean: mean, P50: p50, P90: p50 + 1e6, P99: p50 + 2e6, Max: max}
	}
	m := Metrics{Sent: 10077, Answered: 10077, Received: 9731, LostRoundTrip: 346, LostForward: 160, LostBackward: 186,
		Split: true, RTT: d(6_312_345, 34_500_000, 28_700_000, 170_140_000), Forward: d(1_812_345, 11_790_000, 8_030_000, 125_340_000),
		Backward:  d(4_512_345, 22_710_000, 17_430_000, 104_030_000),
		JitterRTT: JitterStats{N: 9000, MeanAbs: 1_160_000, Smoothed: 2_240_000}}
	var b strings.Builder
	WriteReport(&b, "STAMP session 1: 2001:db8:30::1 → 2001:db8:40::1", &m, clitable.Options{})
	out := b.String()
	t.Logf("\n%s", out)
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > clitable.Width {
			t.Errorf("line %d is %d columns wide: %s", i+1, n, l)
		}
	}
	for _, row := range [][]string{
		{"DIRECTION", "MIN", "MEAN", "P50", "P90", "P99", "MAX", "IPDV", "SMOOTHED", "LOSS"},
		{"round", "trip", "6.31ms", "34.5ms", "28.7ms", "29.7ms", "30.7ms", "170.14ms", "1.16ms", "2.24ms", "3.43%"},
		{"forward", "1.81ms", "11.79ms", "8.03ms"},
		{"backward", "4.51ms", "22.71ms", "17.43ms"},
	} {
		found := false
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			found = found || len(f) >= len(row) && strings.Join(f[:len(row)], " ") == strings.Join(row, " ")
		}
		if !found {
			t.Errorf("no line starting %q", row)
		}
	}
}
