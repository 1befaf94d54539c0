package route

import (
	"encoding/binary"
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

var reasonEchoRateLimit = packet.RegisterReason("icmp_rate_limited") // an Echo Request over echo_rate

type icmpConfig struct {
	EchoRate   config.PacketRate `toml:"echo_rate"`
	ErrorRate  config.PacketRate `toml:"error_rate"`
	ErrorBurst int               `toml:"error_burst"`
}

// icmp answers Echo Requests (ICMPv6 RFC 4443 §4, ICMP RFC 792) sent to
// linerate's own addresses, in place, out of the port they came in on. Its
// error_rate and error_burst set the token bucket that every ICMP error of the
// engine draws from.
type icmp struct {
	rt          *Routed
	echo        *Limiter
	replies6    *stats.Counter
	replies4    *stats.Counter
	badChecksum *stats.Counter
}

func init() {
	plugins.Register(plugins.Kind{Name: "icmp", Summary: "answer ICMPv6 and ICMP Echo Requests for the ports' addresses; set the ICMP error rate (routed mode)", New: newICMP})
}

func newICMP(s *plugins.Setup) (plugins.Stage, error) {
	c := icmpConfig{ErrorRate: 1000, ErrorBurst: 50}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if c.ErrorBurst < 1 {
		return nil, fmt.Errorf("error_burst %d: want at least 1", c.ErrorBurst)
	}
	rt, err := Shared(s)
	if err != nil {
		return nil, err
	}
	if rt.errorRateFrom != "" && (rt.errorRate != uint64(c.ErrorRate) || rt.errorBurst != c.ErrorBurst) {
		return nil, fmt.Errorf("error_rate and error_burst differ from those of %s; the ICMP error rate is one for the engine", rt.errorRateFrom)
	}
	rt.errorRateFrom, rt.errorRate, rt.errorBurst = s.Config.Where(), uint64(c.ErrorRate), c.ErrorBurst
	rt.ICMPErrors.Set(uint64(c.ErrorRate), c.ErrorBurst)
	return &icmp{rt: rt, echo: NewLimiter(uint64(c.EchoRate), max(int(c.EchoRate/100), packet.MaxBurst)),
		replies6:    s.Counters.New("echo_replies_v6", "ICMPv6 Echo Replies sent"),
		replies4:    s.Counters.New("echo_replies_v4", "ICMP Echo Replies sent"),
		badChecksum: s.Counters.New("bad_checksum", "Echo Requests with a wrong checksum, passed on")}, nil
}

func (c *icmp) routed() *Routed { return c.rt }

func (c *icmp) Process(ctx *plugins.Context, b *packet.Burst) {
	fib := c.rt.fib.Load()
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		d := p.Data()
		if len(d) < ethLen+packet.IPv4MinLen+packet.ICMPv4MinLen {
			continue
		}
		if in := c.rt.Port(p.InPort); in != nil && !addressedTo(in.MAC, d) {
			p.Drop(reasonNotForUs) // another host's frame
			continue
		}
		switch binary.BigEndian.Uint16(d[12:]) {
		case packet.EtherTypeIPv6:
			c.echo6(ctx, fib, p, d)
		case packet.EtherTypeIPv4:
			c.echo4(ctx, fib, p, d)
		}
	}
}

// echo6 answers an ICMPv6 Echo Request that follows the IPv6 header directly.
func (c *icmp) echo6(ctx *plugins.Context, fib *FIB, p *packet.Packet, d []byte) {
	ip := packet.IPv6(d[ethLen:])
	if ip.Validate() != nil || ip.NextHeader() != packet.ProtocolICMPv6 || ip.PayloadLength() < packet.ICMPv6MinLen {
		return
	}
	m := packet.ICMPv6(ip.Payload())
	if m.Type() != packet.ICMPv6EchoRequest || m.Code() != 0 {
		return
	}
	src, dst := ip.Src(), ip.Dst()
	if nh, ok := fib.Lookup6(dst); !ok || nh.Kind != Local {
		return
	}
	if !m.IsChecksumValid(src, dst) {
		c.badChecksum.Inc()
		return
	}
	if !c.echo.Allow(ctx.Now) {
		p.Drop(reasonEchoRateLimit)
		return
	}
	ip.SetSrc(dst)
	ip.SetDst(src)
	ip.SetHopLimit(defaultTTL)
	m.SetTypeUpdate(packet.ICMPv6EchoReply) // the pseudo-header sum does not change when addresses swap
	c.turn(p, d)
	c.replies6.Inc()
}

// echo4 answers an ICMP Echo Request.
func (c *icmp) echo4(ctx *plugins.Context, fib *FIB, p *packet.Packet, d []byte) {
	ip := packet.IPv4(d[ethLen:])
	if ip.Validate() != nil || ip.Protocol() != packet.ProtocolICMP || ip.Flags()&packet.IPv4FlagMoreFragments != 0 || ip.FragmentOffset() != 0 {
		return
	}
	m := packet.ICMPv4(ip.Payload())
	if m.Validate() != nil || m.Type() != packet.ICMPv4Echo || m.Code() != 0 {
		return
	}
	src, dst := ip.Src(), ip.Dst()
	if nh, ok := fib.Lookup4(dst); !ok || nh.Kind != Local {
		return
	}
	if !m.IsChecksumValid() || !ip.IsChecksumValid() {
		c.badChecksum.Inc()
		return
	}
	if !c.echo.Allow(ctx.Now) {
		p.Drop(reasonEchoRateLimit)
		return
	}
	ip.SetSrc(dst)
	ip.SetDst(src)
	ip.SetTTL(defaultTTL)
	ip.SetChecksum(ip.CalculateChecksum())
	m.SetTypeUpdate(packet.ICMPv4EchoReply)
	c.turn(p, d)
	c.replies4.Inc()
}

// turn sends the reply back to where the request came from.
func (c *icmp) turn(p *packet.Packet, d []byte) {
	e := packet.Ethernet(d)
	src := e.Dst()
	if in := c.rt.Port(p.InPort); in != nil {
		src = in.MAC
	}
	e.SetDst(e.Src())
	e.SetSrc(src)
	p.Forward(p.InPort)
}
