package builtin

import (
	"encoding/binary"
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "sink", Summary: "consume packets; count them and measure latency and loss from the generator's fields", New: newSink})
}

// sink is the end of a lab path. It frees every packet and, for UDP packets that
// carry the generator's fields, tracks per-flow sequence numbers (loss and
// reordering) and the latency from the generator's tx timestamp to this sink's
// rx timestamp (both on the engine's monotonic clock).
type sink struct {
	port  uint16 // UDP destination port to track; 0 = any
	flows []flowTrack

	// trial, when not 0, is the tag the generator's packets of this trial
	// carry; a packet with another is an earlier trial's, counted apart.
	trial  uint64
	cOther *stats.Counter

	cRecv, cBytes, cTracked, cUntracked, cLost, cReordered, cDup *stats.Counter
	latency                                                      *stats.Histogram
}

// dupWindow is how far back, in sequence numbers, a flow remembers what it
// received: a packet that old or older cannot be told from a duplicate.
const dupWindow = 64

// A flow is 16 bytes, four to a cache line: with 65536 flows in a random
// order the table (1 MiB) is what each packet's cost grows with.
type flowTrack struct {
	// next is one past the highest sequence number received; 0 until the
	// flow's first packet (which sets it to at least 1).
	next uint64
	// win has bit i set when sequence next−1−i was received.
	win uint64
}

type sinkConfig struct {
	UDPPort int `toml:"udp_port"`
	Flows   int `toml:"flows"`
	Trial   int `toml:"trial"`
}

func newSink(s *plugins.Setup) (plugins.Stage, error) {
	c := sinkConfig{Flows: 1024}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if c.UDPPort < 0 || c.UDPPort > 65535 {
		return nil, fmt.Errorf("sink: udp_port %d is outside 0..65535", c.UDPPort)
	}
	if c.Flows < 1 || c.Flows > 65536 {
		return nil, fmt.Errorf("sink: flows %d is outside 1..65536", c.Flows)
	}
	if c.Trial < 0 || c.Trial > 255 {
		return nil, fmt.Errorf("sink: trial %d is outside 0..255", c.Trial)
	}
	return &sink{
		trial:      uint64(c.Trial),
		cOther:     s.Counters.New("other_trial", "packets with generator fields tagged for another trial (late from an earlier one)"),
		port:       uint16(c.UDPPort),
		flows:      make([]flowTrack, c.Flows),
		cRecv:      s.Counters.New("received", "packets received"),
		cBytes:     s.Counters.New("received_bytes", "bytes received"),
		cTracked:   s.Counters.New("tracked", "packets with generator fields"),
		cUntracked: s.Counters.New("untracked", "packets without generator fields, or of a flow beyond flows"),
		cLost:      s.Counters.New("lost", "sequence numbers missing (net of late arrivals)"),
		cReordered: s.Counters.New("reordered", "packets that arrived after a later sequence number"),
		cDup:       s.Counters.New("duplicates", "packets whose sequence number had arrived, within the last 64"),
		latency:    s.Histograms("latency", "generator to sink latency", "ns"),
	}, nil
}

func (k *sink) Process(ctx *plugins.Context, b *packet.Burst) {
	var bytes uint64
	for i := 0; i < b.N; i++ {
		h := b.H[i]
		p := h.P()
		bytes += uint64(p.Len())
		k.track(p)
		p.Consume()
		ctx.Env.Free(h)
	}
	k.cRecv.Add(uint64(b.N))
	k.cBytes.Add(bytes)
}

func (k *sink) track(p *packet.Packet) {
	l, err := p.ParseLayers()
	if err != nil || l.Flags&packet.FlagUDP == 0 {
		k.cUntracked.Inc()
		return
	}
	d := p.Data()
	u := d[l.L4:l.End]
	if len(u) < 8+GenFieldsLen || (k.port != 0 && binary.BigEndian.Uint16(u[2:]) != k.port) {
		k.cUntracked.Inc()
		return
	}
	f := u[8:]
	v := binary.BigEndian.Uint64(f)
	flow, seq := int(v>>48), v&seqMask48
	if k.trial != 0 {
		if (v>>trialShift)&0xFF != k.trial {
			// Not this trial's: its sequence and timestamp belong to another.
			k.cOther.Inc()
			return
		}
		seq &= seqMask40
	}
	if flow >= len(k.flows) {
		k.cUntracked.Inc()
		return
	}
	k.cTracked.Inc()
	if ts := int64(binary.BigEndian.Uint64(f[8:])); ts > 0 && p.RxTime >= ts {
		k.latency.Record(uint64(p.RxTime - ts))
	}
	t := &k.flows[flow]
	switch {
	case t.next == 0: // the flow's first packet
		if seq > 0 {
			k.cLost.Add(seq) // the flow's first packets never came
		}
		t.next, t.win = seq+1, 1
	case seq >= t.next:
		k.cLost.Add(seq - t.next)
		if shift := seq + 1 - t.next; shift < dupWindow {
			t.win = t.win<<shift | 1
		} else {
			t.win = 1
		}
		t.next = seq + 1
	default:
		if back := t.next - 1 - seq; back < dupWindow {
			bit := uint64(1) << back
			if t.win&bit != 0 {
				k.cDup.Inc()
				return
			}
			t.win |= bit
		}
		// Late: it fills a gap counted as loss before.
		k.cReordered.Inc()
		if k.cLost.Local() > 0 {
			k.cLost.Add(^uint64(0))
		}
	}
}
