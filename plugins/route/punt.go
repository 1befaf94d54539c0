package route

import (
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

var (
	reasonPuntNoPort = packet.RegisterReason("punt_no_port") // for the host, and no exception port configured
	reasonPuntLoop   = packet.RegisterReason("punt_loop")    // came from the exception port itself
)

type puntConfig struct {
	Port       string `toml:"port"`
	RewriteMAC *bool  `toml:"rewrite_mac"`
}

// punt is the exception path: what reaches it — traffic for the host that no
// stage answered, or traffic no stage claimed — goes to the kernel through an
// exception port (a TAP), or, without one, is dropped as punt_no_port. With
// rewrite_mac (the default) the frame is addressed to the exception port's
// kernel side, so the host's stack takes it as its own.
type punt struct {
	port    uint16
	name    string
	has     bool
	rewrite bool
	dst     packet.MAC
	src     packet.MAC
	macs    []packet.MAC // each input port's own, by port id
	punted  *stats.Counter
}

func init() {
	plugins.Register(plugins.Kind{Name: "punt", Summary: "send what no stage claimed to the host through a TAP exception port, or drop it with a reason", New: newPunt})
}

func newPunt(s *plugins.Setup) (plugins.Stage, error) {
	var c puntConfig
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	p := &punt{rewrite: c.RewriteMAC == nil || *c.RewriteMAC, punted: s.Counters.New("punted", "packets sent to the exception port")}
	if c.Port != "" {
		pi, ok := s.Ports.Port(c.Port)
		if !ok {
			return nil, fmt.Errorf("punt: no port %q", c.Port)
		}
		p.port, p.has, p.name = pi.ID, true, pi.Name
		p.dst, p.src = pi.DriverMAC, pi.MAC
	}
	for _, pi := range s.Ports.All() {
		if int(pi.ID) >= len(p.macs) {
			p.macs = append(p.macs, make([]packet.MAC, int(pi.ID)+1-len(p.macs))...)
		}
		p.macs[pi.ID] = pi.MAC
	}
	return p, nil
}

// Start checks what only an open port knows (linerate validate opens none).
func (s *punt) Start(ctx *plugins.Context) error {
	if s.has && s.rewrite && s.dst == (packet.MAC{}) {
		return fmt.Errorf("punt: port %q has no MAC of its own to address the host by; set rewrite_mac = false", s.name)
	}
	return nil
}

func (s *punt) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		switch {
		case !s.has:
			p.Drop(reasonPuntNoPort)
		case p.InPort == s.port:
			p.Drop(reasonPuntLoop)
		case s.rewrite && int(p.InPort) < len(s.macs) && !addressedTo(s.macs[p.InPort], p.Data()):
			// Readdressed to the host, another host's frame would be taken
			// as the host's own.
			p.Drop(reasonNotForUs)
		default:
			if d := p.Data(); s.rewrite && len(d) >= ethLen {
				e := packet.Ethernet(d)
				if e.Dst()[0]&1 == 0 {
					e.SetDst(s.dst)
				}
				e.SetSrc(s.src)
			}
			s.punted.Inc()
			p.Forward(s.port)
		}
	}
}
