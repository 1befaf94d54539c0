package route

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// ErrorSender sends the ICMP errors of one stage instance, counted on that
// stage: the route stage's own, and those of other stages that act as a
// router (ioam.transit's Time Exceeded). Every error draws from the
// engine-wide error rate (the icmp stage's error_rate and error_burst).
type ErrorSender struct {
	rt            *Routed
	sent, limited *stats.Counter
}

func newErrorSender(rt *Routed, cs *stats.Set) *ErrorSender {
	return &ErrorSender{rt: rt,
		sent:    cs.New("icmp_errors_sent", "ICMP errors sent (time exceeded, unreachable, too big)"),
		limited: cs.New("icmp_errors_limited", "ICMP errors not sent: over the error rate, or no buffer")}
}

// NewErrorSender is an ErrorSender for a stage other than route. It is nil
// when no port has an address: linerate is a bump in the wire, with no
// address to send an error from.
func NewErrorSender(s *plugins.Setup) (*ErrorSender, error) {
	routed := false
	for _, p := range s.Ports.All() {
		routed = routed || len(p.Addrs) > 0
	}
	if !routed {
		return nil, nil
	}
	rt, err := Shared(s)
	if err != nil {
		return nil, err
	}
	return newErrorSender(rt, s.Counters), nil
}

// Send sends an ICMP error of the packet's IP version (ICMPv6 or ICMPv4, typ
// and code of that version) about the packet in frame d, whose parse record
// is l, back out of the port in it came in on.
func (e *ErrorSender) Send(ctx *plugins.Context, in *Port, d []byte, l *packet.Layers, typ, code uint8, rest uint32) {
	v6 := l.IPVersion == 6
	if in == nil || v6 && !icmp6ErrorAllowed(d, l, typ) || !v6 && !icmp4ErrorAllowed(d, l) {
		return
	}
	if !e.rt.ICMPErrors.Allow(ctx.Now) {
		e.limited.Inc()
		return
	}
	var h packet.Handle
	var ok bool
	if v6 {
		h, ok = buildICMPv6Error(in, d, l, typ, code, rest)
	} else {
		h, ok = buildICMPv4Error(in, d, l, typ, code, rest)
	}
	if !ok {
		e.limited.Inc()
		return
	}
	if ctx.Emit(h, in.ID) {
		e.sent.Inc()
	}
}

// SendAbout is Send about packet p, which came in on its input port, parsed
// if it has no parse record yet. Tagged frames get none: routed mode routes
// untagged frames only.
func (e *ErrorSender) SendAbout(ctx *plugins.Context, p *packet.Packet, typ, code uint8, rest uint32) {
	l, _ := p.ParseLayers()
	if l.IPVersion == 0 || l.VLANs != 0 {
		return
	}
	e.Send(ctx, e.rt.Port(p.InPort), p.Data(), l, typ, code, rest)
}
