package appliance

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// instance is one pipeline's chain on one lcore.
type instance struct {
	pipe      *pipeline
	idx       int // index among the pipeline's instances
	lc        *lcore
	stages    []*stageInst
	producers []int // stage indices that implement plugins.Producer
	tickers   []int
	rx        []rxQueue
	handoffIn []*ring.Handles // rings from the pipeline's other instances
	ctx       plugins.Context
	lastTick  int64
	unclaimed *stageInst // where unclaimed drops are counted: the last stage
	b, hb     packet.Burst
}

type rxQueue struct {
	port     *portEntry
	queue    int
	internal bool // a mem link: keep polling while draining
	stamped  bool // the driver stamps InPort, InQueue and RxTime itself
}

type stageInst struct {
	kind, name string
	st         plugins.Stage
	producer   plugins.Producer
	holder     plugins.Holder
	finite     plugins.Finite
	counters   *stats.Set
	packets    stats.Counter
	drops      [packet.MaxReasons]stats.Counter
	dropsDirty []packet.Reason
	hists      []namedHist
}

type namedHist struct {
	name, help, unit string
	h                *stats.Histogram
}

func (s *stageInst) countDrop(r packet.Reason) {
	c := &s.drops[r]
	if c.Local() == 0 {
		s.dropsDirty = append(s.dropsDirty, r)
	}
	c.Inc()
}

func (in *instance) start() error {
	for _, s := range in.stages {
		if st, ok := s.st.(plugins.Starter); ok {
			in.ctx.Stage = 0
			if err := st.Start(&in.ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (in *instance) stop() {
	for i, s := range in.stages {
		if st, ok := s.st.(plugins.Stopper); ok {
			in.ctx.Stage = i
			st.Stop(&in.ctx)
		}
	}
	// Packets handed to this instance and not yet taken.
	var b packet.Burst
	for _, r := range in.handoffIn {
		for ring.DequeueBurst(r, &b) > 0 {
			for i := 0; i < b.N; i++ {
				in.lc.countDrop(packet.ReasonStopping, 1)
			}
			packet.Free(&b)
		}
	}
}

func (in *instance) held() int {
	n := 0
	for _, s := range in.stages {
		if s.holder != nil {
			n += s.holder.Held()
		}
	}
	for _, r := range in.handoffIn {
		n += r.Len()
	}
	return n
}

func (in *instance) publish() {
	for _, s := range in.stages {
		s.packets.Publish()
		s.counters.Publish()
		for _, r := range s.dropsDirty {
			s.drops[r].Publish()
		}
		for _, h := range s.hists {
			h.h.Publish()
		}
	}
}

// poll runs one round of the instance: its rx queues, handoffs from other lcores,
// its producers and, when due, its tickers.
func (in *instance) poll(now int64, draining bool) int {
	in.lc.cur = in
	b := &in.b
	moved := 0
	for i := range in.rx {
		rq := &in.rx[i]
		if draining && !rq.internal {
			continue
		}
		b.N = 0
		n := rq.port.port.RxBurst(rq.queue, b)
		if n == 0 {
			continue
		}
		packet.OwnBurst(b.H[:n], packet.OpClaim, uint16(in.lc.id), -1)
		if rq.stamped {
			in.lc.tx[rq.port.id].rxPackets.Add(uint64(n))
			in.ctx.Now = b.H[0].P().RxTime
			moved += n
			in.run(b, 0)
			continue
		}
		t := in.lc.e.clock.Now()
		// The port's fields in locals: stores into the packets could alias
		// them, so the loop would reload them per packet.
		stamp, port, queue := rq.port.engineStamps, rq.port.id, uint16(rq.queue)
		bytes := 0
		for _, h := range b.H[:n] {
			p := h.P()
			p.Continue() // a verdict from the sending side of a mem link is not ours
			p.InPort = port
			p.InQueue = queue
			if stamp || p.RxTime == 0 {
				p.RxTime = t
			}
			bytes += p.Len()
		}
		tb := &in.lc.tx[rq.port.id]
		tb.rxPackets.Add(uint64(n))
		tb.rxBytes.Add(uint64(bytes))
		in.ctx.Now = t
		moved += n
		in.run(b, 0)
	}
	for _, r := range in.handoffIn {
		b.N = 0
		if ring.DequeueBurst(r, b) == 0 {
			continue
		}
		packet.OwnBurst(b.H[:b.N], packet.OpClaim, uint16(in.lc.id), -1)
		moved += b.N
		in.ctx.Now = now
		in.runHandoff(b)
	}
	for _, k := range in.producers {
		s := in.stages[k]
		if draining && s.holder == nil {
			continue // sources stop making packets; delay lines still empty out
		}
		b.N = 0
		in.ctx.Now = now
		in.ctx.Stage = k
		in.lc.at = k
		s.producer.Produce(&in.ctx, b)
		in.lc.at = -1
		if b.N > 0 {
			packet.OwnBurst(b.H[:b.N], packet.OpClaim, uint16(in.lc.id), k)
			moved += b.N
			in.run(b, k+1)
		}
	}
	if len(in.tickers) > 0 && now-in.lastTick >= plugins.TickInterval {
		in.lastTick = now
		in.ctx.Now = now
		for _, k := range in.tickers {
			in.ctx.Stage = k
			in.lc.at = k
			in.stages[k].st.(plugins.Ticker).Tick(&in.ctx)
		}
		in.lc.at = -1
	}
	return moved
}

// runHandoff resumes handed-off packets at their stage, in runs of equal stage.
func (in *instance) runHandoff(b *packet.Burst) {
	run := &in.hb
	for i := 0; i < b.N; {
		stage := b.H[i].P().Stage
		run.N = 0
		for i < b.N && b.H[i].P().Stage == stage {
			p := b.H[i].P()
			p.Continue()
			run.H[run.N] = b.H[i]
			run.N++
			i++
		}
		in.run(run, int(stage))
	}
}

// run passes b through the chain from stage `from`. After each stage, packets
// with a verdict leave the burst: Forward to a tx buffer, Drop to the free list
// with its reason counted, Consume to whoever took it. The end of run is a
// quiescent point: what the burst's stages freed goes back to its pools.
func (in *instance) run(b *packet.Burst, from int) {
	lc := in.lc
	for k := from; k < len(in.stages) && b.N > 0; k++ {
		s := in.stages[k]
		in.ctx.Stage = k
		lc.at = k
		s.packets.Add(uint64(b.N))
		s.st.Process(&in.ctx, b)
		j := 0
		for i := 0; i < b.N; i++ {
			h := b.H[i]
			p := h.P()
			if packet.Checked && p.Verdict() != packet.Consume {
				packet.Own(h, packet.OpVerdict, uint16(lc.id), k)
			}
			switch p.Verdict() {
			case packet.Continue:
				b.H[j] = h
				j++
			case packet.Forward:
				lc.forward(h, p.OutPort)
			case packet.Drop:
				s.countDrop(p.Reason)
				lc.free(h)
			case packet.Consume:
			case packet.Handoff:
				to := in.pipe.instances[p.OutPort].lc.id
				packet.OwnTo(h, packet.OpHandoff, uint16(lc.id), uint16(to), k)
				if !in.pipe.handoff[in.idx][p.OutPort].Put(h) {
					packet.Own(h, packet.OpBack, uint16(lc.id), k)
					lc.countDrop(packet.ReasonRingFull, 1)
					lc.free(h)
				}
			default:
				s.countDrop(packet.ReasonUnknown)
				lc.free(h)
			}
		}
		b.N = j
	}
	for i := 0; i < b.N; i++ {
		in.unclaimed.countDrop(packet.ReasonUnclaimed)
		lc.free(b.H[i])
	}
	b.N = 0
	lc.at = -1
	lc.flushFree()
}
