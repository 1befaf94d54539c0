package stamp

import (
	"fmt"
	"io"
	"strings"
	"time"

	clitable "github.com/linerate/linerate/appliance/cli/table"
)

// WriteReport prints a session's metrics: per direction, delay minimum,
// mean, percentiles and maximum, jitter and loss, laid out by o. "answered" is Metrics.Answered, as in the
// API: the test packets up to the highest sequence number answered, each
// received or lost.
func WriteReport(w io.Writer, title string, m *Metrics, o clitable.Options) {
	var b strings.Builder
	clitable.Text(&b, o, 0, title)
	clitable.Text(&b, o, 2, fmt.Sprintf("sent %d, answered %d (%d received, %d lost), %d in flight, %d duplicates, %d reordered",
		m.Sent, m.Answered, m.Received, m.LostRoundTrip, m.InFlight, m.Duplicates, m.Reordered))
	rate := func(n int64, of uint64) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f%% (%d)", 100*float64(n)/float64(of), n)
	}
	// A delay's first figures are its minimum and its mean.
	cols := clitable.Cols("DIRECTION", "MIN", "MEAN", "P50", "P90", "P99", "MAX", "IPDV", "SMOOTHED", "LOSS")
	cols[9].Wrap = true
	t := clitable.New(cols...)
	t.Indent = 2
	row := func(name string, d *DelayStats, j *JitterStats, loss string) {
		if d.N == 0 {
			// No records: no delays.
			t.Add(name, "-", "-", "-", "-", "-", "-", "-", "-", loss)
			return
		}
		t.Add(name, Dur(d.Min), Dur(d.Mean), Dur(d.P50), Dur(d.P90), Dur(d.P99), Dur(d.Max), Dur(j.MeanAbs),
			Dur(int64(j.Smoothed)), loss)
	}
	row("round trip", &m.RTT, &m.JitterRTT, rate(m.LostRoundTrip, m.Answered))
	fwdLoss, bwdLoss := "not split", "not split"
	if m.Split {
		fwdLoss = rate(m.LostForward, m.Answered)
		bwdLoss = rate(m.LostBackward, m.Answered-uint64(m.LostForward))
	}
	row("forward", &m.Forward, &m.JitterForward, fwdLoss)
	row("backward", &m.Backward, &m.JitterBack, bwdLoss)
	t.Write(&b, o)
	if !m.Split {
		clitable.Text(&b, o, 2, "loss is not split by direction: the reflector is stateless")
	}
	if m.Unsynchronized > 0 {
		clitable.Text(&b, o, 2, fmt.Sprintf("one-way delays unsynchronised: %d records carry an S bit of 0", m.Unsynchronized))
	}
	if m.Forward.Negative+m.Backward.Negative > 0 {
		clitable.Text(&b, o, 2, fmt.Sprintf("%d negative one-way delays: the clocks disagree", m.Forward.Negative+m.Backward.Negative))
	}
	if m.RecordsLost > 0 {
		clitable.Text(&b, o, 2, fmt.Sprintf("%d records not kept for the control API: its FIFO was full (linerate stamp results drains it); the metrics count them all", m.RecordsLost))
	}
	io.WriteString(w, b.String())
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
