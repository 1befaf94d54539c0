package stamp

import (
	"fmt"
	"io"
	"time"
)

// WriteReport prints a session's metrics: per direction, delay percentiles,
// jitter and loss. "answered" is Metrics.Answered, as in the API: the test
// packets up to the highest sequence number answered, each received or lost.
func WriteReport(w io.Writer, title string, m *Metrics) {
	fmt.Fprintf(w, "%s\n  sent %d, answered %d (%d received, %d lost), %d in flight, %d duplicates, %d reordered\n",
		title, m.Sent, m.Answered, m.Received, m.LostRoundTrip, m.InFlight, m.Duplicates, m.Reordered)
	rate := func(n int64, of uint64) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f%% (%d)", 100*float64(n)/float64(of), n)
	}
	row := func(name string, d *DelayStats, j *JitterStats, loss string) {
		if d.N == 0 {
			fmt.Fprintf(w, "  %-10s no records  loss %s\n", name, loss)
			return
		}
		fmt.Fprintf(w, "  %-10s p50 %-9s p90 %-9s p99 %-9s max %-9s mean %-9s ipdv %-9s smoothed %-9s loss %s\n", name,
			Dur(d.P50), Dur(d.P90), Dur(d.P99), Dur(d.Max), Dur(d.Mean), Dur(j.MeanAbs), Dur(int64(j.Smoothed)), loss)
	}
	row("round trip", &m.RTT, &m.JitterRTT, rate(m.LostRoundTrip, m.Answered))
	fwdLoss, bwdLoss := "not split (stateless reflector)", "not split (stateless reflector)"
	if m.Split {
		fwdLoss = rate(m.LostForward, m.Answered)
		bwdLoss = rate(m.LostBackward, m.Answered-uint64(m.LostForward))
	}
	row("forward", &m.Forward, &m.JitterForward, fwdLoss)
	row("backward", &m.Backward, &m.JitterBack, bwdLoss)
	if m.Unsynchronized > 0 {
		fmt.Fprintf(w, "  one-way delays unsynchronised: %d records carry an S bit of 0\n", m.Unsynchronized)
	}
	if m.Forward.Negative+m.Backward.Negative > 0 {
		fmt.Fprintf(w, "  %d negative one-way delays: the clocks disagree\n", m.Forward.Negative+m.Backward.Negative)
	}
	if m.RecordsLost > 0 {
		fmt.Fprintf(w, "  %d records not kept for the control API: its FIFO was full (linerate stamp results drains it); the metrics count them all\n", m.RecordsLost)
	}
}

// Dur formats nanoseconds for people.
func Dur(ns int64) string {
	d := time.Duration(ns)
	switch a := max(d, -d); {
	case a >= time.Second:
		return d.Round(time.Millisecond).String()
	case a >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case a >= time.Microsecond:
		return d.Round(100 * time.Nanosecond).String()
	}
	return d.String()
}
