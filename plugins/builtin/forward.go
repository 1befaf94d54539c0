package builtin

import (
	"encoding/binary"
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "forward", Summary: "send every packet to a port, optionally rewriting or swapping MACs", New: newForward})
	plugins.Register(plugins.Kind{Name: "counter", Summary: "count packets and bytes", New: newCounter})
}

// forward sends every packet to one port. With port = "in" it sends each packet
// back out of the port it came in on (a reflector's turnaround).
type forward struct {
	port    uint16
	toIn    bool
	swapMAC bool
	setSrc  bool
	setDst  bool
	src     [6]byte
	dst     [6]byte
}

type forwardConfig struct {
	Port    string     `toml:"port"`
	SwapMAC bool       `toml:"swap_mac"`
	SrcMAC  config.MAC `toml:"src_mac"`
	DstMAC  config.MAC `toml:"dst_mac"`
}

func newForward(s *plugins.Setup) (plugins.Stage, error) {
	var c forwardConfig
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	f := &forward{swapMAC: c.SwapMAC}
	switch c.Port {
	case "":
		return nil, fmt.Errorf("forward needs a port (a port name, or \"in\")")
	case "in":
		f.toIn = true
	default:
		pi, ok := s.Ports.Port(c.Port)
		if !ok {
			return nil, fmt.Errorf("forward: no port %q", c.Port)
		}
		f.port = pi.ID
	}
	if c.SrcMAC != (config.MAC{}) {
		f.setSrc, f.src = true, c.SrcMAC
	}
	if c.DstMAC != (config.MAC{}) {
		f.setDst, f.dst = true, c.DstMAC
	}
	if f.swapMAC && (f.setSrc || f.setDst) {
		return nil, fmt.Errorf("forward: swap_mac and src_mac/dst_mac exclude each other")
	}
	return f, nil
}

func (f *forward) Process(ctx *plugins.Context, b *packet.Burst) {
	// The options in locals: stores into packet data could alias f, so the
	// loop would reload them from f for every packet.
	swap, setDst, setSrc, toIn := f.swapMAC, f.setDst, f.setSrc, f.toIn
	if swap && !toIn {
		// swap_mac towards one port, the common case, in a loop of its own:
		// with no option left to test per packet, its state fits in
		// registers.
		f.swapTo(ctx, b)
		return
	}
	rewrite := swap || setDst || setSrc
	bad := 0
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		if p.Len() < 14 {
			p.Drop(packet.ReasonMalformed)
			bad++
			continue
		}
		if rewrite {
			d := p.Data()[:14]
			if swap {
				// Two loads and two stores per address, no byte loop.
				d0, d1 := binary.LittleEndian.Uint32(d[0:]), binary.LittleEndian.Uint16(d[4:])
				s0, s1 := binary.LittleEndian.Uint32(d[6:]), binary.LittleEndian.Uint16(d[10:])
				binary.LittleEndian.PutUint32(d[0:], s0)
				binary.LittleEndian.PutUint16(d[4:], s1)
				binary.LittleEndian.PutUint32(d[6:], d0)
				binary.LittleEndian.PutUint16(d[10:], d1)
			}
			if setDst {
				copy(d[0:6], f.dst[:])
			}
			if setSrc {
				copy(d[6:12], f.src[:])
			}
		}
		if toIn {
			p.Forward(p.InPort)
		}
	}
	if toIn {
		return
	}
	f.send(ctx, b, bad)
}

// swapTo swaps every packet's MACs and forwards the burst to f.port (swap_mac
// excludes src_mac and dst_mac).
func (f *forward) swapTo(ctx *plugins.Context, b *packet.Burst) {
	bad := 0
	for _, h := range b.H[:b.N] {
		p := h.P()
		d := p.Data()
		if len(d) < 14 {
			p.Drop(packet.ReasonMalformed)
			bad++
			continue
		}
		// Two loads and two stores per address, no byte loop.
		d0, d1 := binary.LittleEndian.Uint32(d[0:]), binary.LittleEndian.Uint16(d[4:])
		s0, s1 := binary.LittleEndian.Uint32(d[6:]), binary.LittleEndian.Uint16(d[10:])
		binary.LittleEndian.PutUint32(d[0:], s0)
		binary.LittleEndian.PutUint16(d[4:], s1)
		binary.LittleEndian.PutUint32(d[6:], d0)
		binary.LittleEndian.PutUint16(d[10:], d1)
	}
	f.send(ctx, b, bad)
}

// send forwards the burst's packets still at Continue to f.port: the whole
// burst in one move when none was dropped.
func (f *forward) send(ctx *plugins.Context, b *packet.Burst, bad int) {
	if bad == 0 {
		ctx.ForwardBurst(b, f.port)
		return
	}
	for i := 0; i < b.N; i++ {
		if p := b.H[i].P(); p.Verdict() == packet.Continue {
			p.Forward(f.port)
		}
	}
}

// counter counts what passes and lets it continue.
type counter struct {
	packets, bytes *stats.Counter
}

func newCounter(s *plugins.Setup) (plugins.Stage, error) {
	var c struct{}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	return &counter{packets: s.Counters.New("packets", "packets seen"), bytes: s.Counters.New("bytes", "bytes seen")}, nil
}

func (c *counter) Process(ctx *plugins.Context, b *packet.Burst) {
	var n uint64
	for i := 0; i < b.N; i++ {
		n += uint64(b.H[i].P().Len())
	}
	c.packets.Add(uint64(b.N))
	c.bytes.Add(n)
}
