package appliance

import (
	"sort"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/ports"
)

// Snapshot reads every published counter.
func (e *Engine) Snapshot() *stats.Snapshot {
	if e.opt.Manual {
		// A Manual engine's lcores publish as running ones do, every few
		// busy loops; what its caller stepped since is published here.
		e.manualMu.Lock()
		for _, lc := range e.lcores {
			lc.publish()
		}
		e.manualMu.Unlock()
	}
	s := &stats.Snapshot{Time: time.Now()}
	if !e.started.IsZero() {
		s.Uptime = time.Since(e.started)
	}
	for _, pe := range e.ports {
		ps := stats.PortSnapshot{Name: pe.name, Driver: pe.driver, TimestampSource: pe.info.TimestampSource}
		// Packets and bytes are what the engine moved; drops, errors and extras
		// are the driver's own.
		for _, lc := range e.lcores {
			if int(pe.id) < len(lc.tx) {
				t := &lc.tx[pe.id]
				ps.RxPackets += t.rxPackets.Load()
				ps.RxBytes += t.rxBytes.Load()
				ps.TxPackets += t.txPackets.Load()
				ps.TxBytes += t.txBytes.Load()
			}
		}
		if pe.port != nil {
			var st ports.Stats
			if f := pe.final.Load(); f != nil {
				st, ps.LinkUp = f.Stats, f.linkUp // closed: as it was at stop
			} else {
				st, ps.LinkUp = pe.port.Stats(), pe.port.Info().LinkUp
			}
			ps.RxDropped, ps.TxDropped, ps.RxErrors, ps.Extra = st.RxDropped, st.TxDropped, st.RxErrors, st.Extra
			if pe.driverRxBytes {
				ps.RxBytes = st.RxBytes
			}
			if pe.handleTx != nil {
				ps.TxBytes = st.TxBytes
			}
		}
		s.Ports = append(s.Ports, ps)
	}
	totals := map[string]uint64{}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, si := range in.stages {
				ss := stats.StageSnapshot{Pipeline: pl.name, Name: si.name, Kind: si.kind, Lcore: in.lc.id,
					Packets: si.packets.Load()}
				si.counters.Each(func(name, help string, v uint64) {
					ss.Counters = append(ss.Counters, stats.CounterValue{Name: name, Help: help, Value: v})
				})
				ss.Drops = dropList(&si.drops)
				for _, d := range ss.Drops {
					totals[d.Reason] += d.Count
				}
				s.Stages = append(s.Stages, ss)
				for _, h := range si.hists {
					s.Histogram = append(s.Histogram, stats.NamedHist{Owner: pl.name + "/" + si.name, Name: h.name,
						Help: h.help, Unit: h.unit, Hist: h.h.Snapshot()})
				}
			}
		}
	}
	for _, lc := range e.lcores {
		drops := dropList(&lc.drops)
		if len(drops) > 0 || lc.copies.Load() > 0 {
			es := stats.StageSnapshot{Pipeline: "", Name: "engine", Kind: "engine", Lcore: lc.id, Drops: drops,
				Counters: []stats.CounterValue{{Name: "tx_copies", Help: "packets copied into a port's own pool at transmit", Value: lc.copies.Load()}}}
			for _, d := range drops {
				totals[d.Reason] += d.Count
			}
			s.Stages = append(s.Stages, es)
		}
		s.Lcores = append(s.Lcores, stats.LcoreSnapshot{ID: lc.id, CPU: lc.cpu, Loops: lc.loops.Load(),
			BusyLoops: lc.busy.Load(), Packets: lc.packets.Load(), Gap: lc.gap.Snapshot()})
	}
	names := make([]string, 0, len(e.pools))
	for n := range e.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ps := e.pools[n].Stats()
		s.Pools = append(s.Pools, stats.PoolSnapshot{Name: n, Size: ps.Size, InUse: ps.InUse, AllocFail: ps.AllocFail, Copies: ps.Copies})
	}
	reasons := make([]string, 0, len(totals))
	for r := range totals {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		s.Drops = append(s.Drops, stats.DropCount{Reason: r, Count: totals[r]})
	}
	return s
}

func dropList(d *[packet.MaxReasons]stats.Counter) []stats.DropCount {
	var out []stats.DropCount
	for r := range d {
		if v := d[r].Load(); v > 0 {
			out = append(out, stats.DropCount{Reason: packet.Reason(r).String(), Count: v})
		}
	}
	return out
}
