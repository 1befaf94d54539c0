package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
)

// summary is what run reports when it stops: the snapshot's figures, the
// instances of each stage summed, and the lab's (what generators sent, what
// sinks received, the percentiles of the stage histograms).
type summary struct {
	snap   *stats.Snapshot
	secs   float64
	stages []stageSum
	sent   uint64 // by every generator
	sinks  []sinkSum
	hists  []histSum
}

// stageSum is a stage's instances summed; lcores are the lcores they ran on.
type stageSum struct {
	stats.StageSnapshot
	lcores []int
}

type sinkSum struct {
	name                      string
	received, bytes, lost, re uint64
	loss                      float64 // %
}

type histSum struct {
	owner, name, unit string
	h                 *stats.HistSnapshot
}

func newSummary(s *stats.Snapshot) *summary {
	sum := &summary{snap: s, secs: s.Uptime.Seconds(), stages: mergeStages(s.Stages)}
	if sum.secs <= 0 {
		sum.secs = 1
	}
	var generators uint64
	for _, st := range sum.stages {
		switch st.Kind {
		case "generator":
			sum.sent += counter(st.StageSnapshot, "sent")
			generators++
		case "sink":
			sum.sinks = append(sum.sinks, sinkSum{name: st.Pipeline + "/" + st.Name, received: counter(st.StageSnapshot, "received"),
				bytes: counter(st.StageSnapshot, "received_bytes"), lost: counter(st.StageSnapshot, "lost"),
				re: counter(st.StageSnapshot, "reordered")})
		}
	}
	for i := range sum.sinks {
		k := &sum.sinks[i]
		switch {
		case generators > 1 && k.received+k.lost > 0:
			// Several paths, each with its own generator: a sink's loss is
			// its own sequence gaps.
			k.loss = 100 * float64(k.lost) / float64(k.received+k.lost)
		case sum.sent > 0:
			k.loss = 100 * (1 - float64(k.received)/float64(sum.sent))
		}
	}
	// A stage's histograms, the instances merged; only those that recorded
	// anything.
	byKey := map[string]*histSum{}
	var keys []string
	for _, h := range s.Histogram {
		key := h.Owner + " " + h.Name
		if byKey[key] == nil {
			byKey[key] = &histSum{owner: h.Owner, name: h.Name, unit: h.Unit, h: stats.NewHistSnapshot()}
			keys = append(keys, key)
		}
		byKey[key].h.Add(h.Hist)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if byKey[k].h.Count > 0 {
			sum.hists = append(sum.hists, *byKey[k])
		}
	}
	return sum
}

// mergeStages sums the instances of a stage that runs on several lcores.
func mergeStages(in []stats.StageSnapshot) []stageSum {
	type key struct{ p, n string }
	idx := map[key]int{}
	var out []stageSum
	for _, st := range in {
		k := key{st.Pipeline, st.Name}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			cp := st
			cp.Counters = append([]stats.CounterValue(nil), st.Counters...)
			cp.Drops = append([]stats.DropCount(nil), st.Drops...)
			out = append(out, stageSum{StageSnapshot: cp, lcores: []int{st.Lcore}})
			continue
		}
		o := &out[i]
		o.lcores = append(o.lcores, st.Lcore)
		o.Packets += st.Packets
		for _, c := range st.Counters {
			found := false
			for j := range o.Counters {
				if o.Counters[j].Name == c.Name {
					o.Counters[j].Value += c.Value
					found = true
				}
			}
			if !found {
				o.Counters = append(o.Counters, c)
			}
		}
		for _, d := range st.Drops {
			found := false
			for j := range o.Drops {
				if o.Drops[j].Reason == d.Reason {
					o.Drops[j].Count += d.Count
					found = true
				}
			}
			if !found {
				o.Drops = append(o.Drops, d)
			}
		}
	}
	return out
}

func counter(st stats.StageSnapshot, name string) uint64 {
	for _, c := range st.Counters {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// write prints the summary's tables: ports, the rate, stages with their
// counters and drops, drops by reason, sinks, percentiles.
func (sum *summary) write(w io.Writer, o table.Options) error {
	s := sum.snap
	var b strings.Builder
	up := s.Uptime.Truncate(time.Millisecond)
	fmt.Fprintf(&b, "\nlinerate ran for %s\n\n", up)

	cols := table.Cols("PORT", "DRIVER", "RX PACKETS", "RX BYTES", "TX PACKETS", "TX BYTES", "RX DROPPED", "TX DROPPED")
	for i := 2; i < len(cols); i++ {
		cols[i].Right = true
	}
	t := table.New(cols...)
	for _, p := range s.Ports {
		t.Add(p.Name, p.Driver, u64(p.RxPackets), u64(p.RxBytes), u64(p.TxPackets), u64(p.TxBytes), u64(p.RxDropped),
			u64(p.TxDropped))
	}
	t.Write(&b, o)
	_, _, txp, txb := portTotals(s)
	fmt.Fprintf(&b, "\nrate: %.3f Mpps, %.3f Gbit/s transmitted (all ports, over %s)\n\n", float64(txp)/sum.secs/1e6,
		float64(txb)*8/sum.secs/1e9, up)

	cols = table.Cols("PIPELINE", "STAGE", "KIND", "LCORES", "PACKETS", "COUNTERS", "DROPS")
	cols[3].Wrap = true
	cols[4].Right = true
	cols[5].Wrap, cols[5].Detail = true, true
	cols[6].Wrap, cols[6].Detail = true, true
	t = table.New(cols...)
	t.Key = 2
	for _, st := range sum.stages {
		var cs, ds []string
		for _, c := range st.Counters {
			if c.Value > 0 {
				cs = append(cs, c.Name+"="+u64(c.Value))
			}
		}
		for _, d := range st.Drops {
			ds = append(ds, d.Reason+"="+u64(d.Count))
		}
		lc := make([]string, len(st.lcores))
		for i, l := range st.lcores {
			lc[i] = strconv.Itoa(l)
		}
		t.Add(st.Pipeline, st.Name, st.Kind, strings.Join(lc, ","), u64(st.Packets), cmp.Or(strings.Join(cs, " "), "-"),
			cmp.Or(strings.Join(ds, " "), "-"))
	}
	t.Write(&b, o)

	if len(s.Drops) > 0 {
		t = table.New(table.Column{Name: "DROP REASON"}, table.Column{Name: "PACKETS", Right: true})
		var notes []string
		for _, d := range s.Drops {
			t.Add(d.Reason, u64(d.Count))
			if r, ok := packet.ReasonNamed(d.Reason); ok && r.ExpectedWhy() != "" {
				notes = append(notes, d.Reason+": "+r.ExpectedWhy()+".")
			}
		}
		b.WriteString("\n")
		t.Write(&b, o)
		if len(notes) > 0 {
			table.Text(&b, o, 0, "Expected drops, their stages working as configured:")
			for _, n := range notes {
				table.Text(&b, o, 2, n)
			}
		}
	}

	if len(sum.sinks) > 0 {
		fmt.Fprintf(&b, "\nlab: %d packets generated\n", sum.sent)
		cols = table.Cols("SINK", "RECEIVED", "MPPS", "GBIT/S", "LOSS", "SEQUENCE GAPS", "REORDERED")
		for i := 1; i < len(cols); i++ {
			cols[i].Right = true
		}
		t = table.New(cols...)
		t.Indent = 2
		for _, k := range sum.sinks {
			t.Add(k.name, u64(k.received), fmt.Sprintf("%.3f", float64(k.received)/sum.secs/1e6),
				fmt.Sprintf("%.3f", float64(k.bytes)*8/sum.secs/1e9), fmt.Sprintf("%.3f%%", k.loss), u64(k.lost), u64(k.re))
		}
		t.Write(&b, o)
	}

	if len(sum.hists) > 0 {
		rows := make([]histRow, len(sum.hists))
		for i, h := range sum.hists {
			f := func(v uint64) string {
				if h.unit == "ns" {
					return dur(v)
				}
				return fmtUnit(v, h.unit)
			}
			rows[i] = histRow{h.owner, h.name, []string{u64(h.h.Count), f(h.h.Min), f(uint64(math.Round(h.h.Mean()))),
				f(h.h.Quantile(0.5)), f(h.h.Quantile(0.9)), f(h.h.Quantile(0.99)), f(h.h.Quantile(0.999)), f(h.h.Max)}}
		}
		b.WriteString("\n")
		histTable(rows).Write(&b, o)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// histRow is one histogram in a table of histograms: its owner
// ("pipeline/stage"), its name, and its figures in histCols' order.
type histRow struct {
	owner, name string
	figures     []string
}

// histCols are the figures of a histogram's row: a delay's first figures
// are its minimum and its mean.
var histCols = []string{"COUNT", "MIN", "MEAN", "P50", "P90", "P99", "P99.9", "MAX"}

// histTable lays histograms out under their owners, an owner's line and then
// its histograms' lines, indented: a name column beside the owner's would
// take the 100 columns the eight figures need. Rows come sorted by owner.
func histTable(rows []histRow) *table.Table {
	cols := table.Cols(append([]string{"HISTOGRAM"}, histCols...)...)
	cols[0].Wrap = true
	for i := 1; i < len(cols); i++ {
		cols[i].Right = true
	}
	t := table.New(cols...)
	for i, r := range rows {
		if i == 0 || r.owner != rows[i-1].owner {
			t.Add(r.owner)
		}
		t.Add(append([]string{"  " + r.name}, r.figures...)...)
	}
	return t
}

// dur prints nanoseconds to four significant digits, finer than a histogram's
// buckets (0.4 %): 850ns, 12.35µs, 1.069ms. --json has the exact values.
func dur(ns uint64) string {
	if ns < 1000 {
		return strconv.FormatUint(ns, 10) + "ns"
	}
	x := float64(ns)
	for _, unit := range []string{"µs", "ms"} {
		if x /= 1000; x < 999.95 {
			return sig4(x) + unit
		}
	}
	return sig4(x/1000) + "s"
}

// sig4 is x (≥ 1) to four significant digits, without an exponent.
func sig4(x float64) string {
	switch {
	case x < 9.9995:
		return strconv.FormatFloat(x, 'f', 3, 64)
	case x < 99.995:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 999.95:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

// writeJSON prints the summary for scripts: every figure the tables show,
// each stage instance on its own, the lcores and the pools.
func (sum *summary) writeJSON(w io.Writer) error {
	type drop struct {
		Reason string `json:"reason"`
		Count  uint64 `json:"count"`
	}
	drops := func(ds []stats.DropCount) []drop {
		out := make([]drop, len(ds))
		for i, d := range ds {
			out[i] = drop{d.Reason, d.Count}
		}
		return out
	}
	type port struct {
		Name            string            `json:"name"`
		Driver          string            `json:"driver"`
		RxPackets       uint64            `json:"rx_packets"`
		RxBytes         uint64            `json:"rx_bytes"`
		TxPackets       uint64            `json:"tx_packets"`
		TxBytes         uint64            `json:"tx_bytes"`
		RxDropped       uint64            `json:"rx_dropped"`
		TxDropped       uint64            `json:"tx_dropped"`
		RxErrors        uint64            `json:"rx_errors"`
		TimestampSource string            `json:"timestamp_source"`
		LinkUp          bool              `json:"link_up"`
		Extra           map[string]uint64 `json:"extra,omitempty"`
	}
	type stage struct {
		Pipeline string            `json:"pipeline"`
		Name     string            `json:"name"`
		Kind     string            `json:"kind"`
		Lcore    int               `json:"lcore"`
		Packets  uint64            `json:"packets"`
		Counters map[string]uint64 `json:"counters"`
		Drops    []drop            `json:"drops"`
	}
	type lcore struct {
		Lcore     int    `json:"lcore"`
		CPU       int    `json:"cpu"`
		Loops     uint64 `json:"loops"`
		BusyLoops uint64 `json:"busy_loops"`
		Packets   uint64 `json:"packets"`
	}
	type pool struct {
		Name          string `json:"name"`
		Size          int    `json:"size"`
		InUse         int    `json:"in_use"`
		AllocFailures uint64 `json:"alloc_failures"`
		Copies        uint64 `json:"copies"`
	}
	type sink struct {
		Name          string  `json:"name"`
		Received      uint64  `json:"received"`
		ReceivedBytes uint64  `json:"received_bytes"`
		Mpps          float64 `json:"mpps"`
		Gbps          float64 `json:"gbit_per_s"`
		LossPercent   float64 `json:"loss_percent"`
		SequenceGaps  uint64  `json:"sequence_gaps"`
		Reordered     uint64  `json:"reordered"`
	}
	type hist struct {
		Owner string  `json:"owner"`
		Name  string  `json:"name"`
		Unit  string  `json:"unit"`
		Count uint64  `json:"count"`
		Min   uint64  `json:"min"`
		Mean  float64 `json:"mean"`
		P50   uint64  `json:"p50"`
		P90   uint64  `json:"p90"`
		P99   uint64  `json:"p99"`
		P999  uint64  `json:"p999"`
		Max   uint64  `json:"max"`
	}
	s := sum.snap
	_, _, txp, txb := portTotals(s)
	out := struct {
		UptimeNs   int64   `json:"uptime_ns"`
		TxMpps     float64 `json:"tx_mpps"`
		TxGbps     float64 `json:"tx_gbit_per_s"`
		Ports      []port  `json:"ports"`
		Stages     []stage `json:"stages"`
		Lcores     []lcore `json:"lcores"`
		Pools      []pool  `json:"pools"`
		Drops      []drop  `json:"drops"`
		Generated  uint64  `json:"generated"`
		Sinks      []sink  `json:"sinks"`
		Histograms []hist  `json:"histograms"`
	}{UptimeNs: s.Uptime.Nanoseconds(), TxMpps: float64(txp) / sum.secs / 1e6, TxGbps: float64(txb) * 8 / sum.secs / 1e9,
		Ports: []port{}, Stages: []stage{}, Lcores: []lcore{}, Pools: []pool{}, Drops: drops(s.Drops), Generated: sum.sent,
		Sinks: []sink{}, Histograms: []hist{}}
	for _, p := range s.Ports {
		out.Ports = append(out.Ports, port{p.Name, p.Driver, p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes, p.RxDropped,
			p.TxDropped, p.RxErrors, p.TimestampSource, p.LinkUp, p.Extra})
	}
	for _, st := range s.Stages {
		cs := map[string]uint64{}
		for _, c := range st.Counters {
			cs[c.Name] = c.Value
		}
		out.Stages = append(out.Stages, stage{st.Pipeline, st.Name, st.Kind, st.Lcore, st.Packets, cs, drops(st.Drops)})
	}
	for _, l := range s.Lcores {
		out.Lcores = append(out.Lcores, lcore{l.ID, l.CPU, l.Loops, l.BusyLoops, l.Packets})
	}
	for _, p := range s.Pools {
		out.Pools = append(out.Pools, pool{p.Name, p.Size, p.InUse, p.AllocFail, p.Copies})
	}
	for _, k := range sum.sinks {
		out.Sinks = append(out.Sinks, sink{k.name, k.received, k.bytes, float64(k.received) / sum.secs / 1e6,
			float64(k.bytes) * 8 / sum.secs / 1e9, k.loss, k.lost, k.re})
	}
	for _, h := range sum.hists {
		out.Histograms = append(out.Histograms, hist{h.owner, h.name, h.unit, h.h.Count, h.h.Min, h.h.Mean(), h.h.Quantile(0.5),
			h.h.Quantile(0.9), h.h.Quantile(0.99), h.h.Quantile(0.999), h.h.Max})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
