package builtin

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "classify", Summary: "steer packets to ports or rings by next header, UDP port, destination prefix, Hop-by-Hop (IOAM) or SRH presence", New: newClassify})
}

// classify steers packets in pipeline mode: the first rule that matches sends
// the packet to its port (typically a mem ring feeding a worker lcore). Packets
// no rule matches take the default: continue down this chain, drop, or a port.
// The parse it does stays in the packet's scratch area for later stages.
type classify struct {
	ports  plugins.Ports // for Reload
	rules  []rule
	defAct action
	cMatch []*stats.Counter
	cDef   *stats.Counter
	cBad   *stats.Counter
}

type action struct {
	kind int // actContinue, actDrop, actPort
	port uint16
}

const (
	actContinue = iota
	actDrop
	actPort
)

type rule struct {
	proto    int // final upper-layer protocol (IPv6 next header / IPv4 protocol); -1 any
	udpDst   int // -1 any
	udpSrc   int
	prefix   netip.Prefix
	hasPfx   bool
	hopByHop int // -1 any, 0 absent, 1 present
	srh      int
	act      action
}

type ruleConfig struct {
	NextHeader *int          `toml:"next_header"`
	UDPDstPort *int          `toml:"udp_dst_port"`
	UDPSrcPort *int          `toml:"udp_src_port"`
	DstPrefix  config.Prefix `toml:"dst_prefix"`
	HopByHop   *bool         `toml:"hop_by_hop"`
	SRH        *bool         `toml:"srh"`
	Port       string        `toml:"port"`
}

type classifyConfig struct {
	Rules   []ruleConfig `toml:"rules"`
	Default string       `toml:"default"`
}

var reasonClassified = packet.RegisterReason("classify_drop")

func readClassify(cfg plugins.Config) (classifyConfig, error) {
	c := classifyConfig{Default: "continue"}
	err := cfg.Decode(&c)
	return c, err
}

func newClassify(s *plugins.Setup) (plugins.Stage, error) {
	c, err := readClassify(s.Config)
	if err != nil {
		return nil, err
	}
	k := &classify{ports: s.Ports,
		cDef: s.Counters.New("default", "packets no rule matched"),
		cBad: s.Counters.New("unparsed", "packets that did not parse (taken by the default)")}
	if k.rules, k.defAct, err = buildRules(c, s.Ports); err != nil {
		return nil, err
	}
	for i := range k.rules {
		k.cMatch = append(k.cMatch, s.Counters.New(fmt.Sprintf("rule%d", i), fmt.Sprintf("packets rule %d matched", i)))
	}
	return k, nil
}

// Reload takes new rules and a new default. Each rule has a counter of its
// own, registered at setup, so their number changes only with a restart.
func (k *classify) Reload(_ *plugins.Context, cfg plugins.Config) (func(), error) {
	c, err := readClassify(cfg)
	if err != nil {
		return nil, err
	}
	rules, def, err := buildRules(c, k.ports)
	if err != nil {
		return nil, err
	}
	if len(rules) != len(k.rules) {
		return nil, fmt.Errorf("classify: %d rules: the number of rules changes only with a restart (it is %d; each has its own counter)",
			len(rules), len(k.rules))
	}
	return func() { k.rules, k.defAct = rules, def }, nil
}

func buildRules(c classifyConfig, ports plugins.Ports) ([]rule, action, error) {
	parseAct := func(what, v string) (action, error) {
		switch v {
		case "continue", "":
			return action{kind: actContinue}, nil
		case "drop":
			return action{kind: actDrop}, nil
		}
		pi, ok := ports.Port(v)
		if !ok {
			return action{}, fmt.Errorf("classify: %s: no port %q (or use continue, drop)", what, v)
		}
		return action{kind: actPort, port: pi.ID}, nil
	}
	def, err := parseAct("default", c.Default)
	if err != nil {
		return nil, def, err
	}
	tri := func(b *bool) int {
		if b == nil {
			return -1
		}
		if *b {
			return 1
		}
		return 0
	}
	opt := func(v *int, lim int, name string) (int, error) {
		if v == nil {
			return -1, nil
		}
		if *v < 0 || *v > lim {
			return 0, fmt.Errorf("classify: %s %d is outside 0..%d", name, *v, lim)
		}
		return *v, nil
	}
	var rules []rule
	for i, rc := range c.Rules {
		r := rule{hopByHop: tri(rc.HopByHop), srh: tri(rc.SRH)}
		if r.proto, err = opt(rc.NextHeader, 255, "next_header"); err != nil {
			return nil, def, err
		}
		if r.udpDst, err = opt(rc.UDPDstPort, 65535, "udp_dst_port"); err != nil {
			return nil, def, err
		}
		if r.udpSrc, err = opt(rc.UDPSrcPort, 65535, "udp_src_port"); err != nil {
			return nil, def, err
		}
		if rc.DstPrefix.IsValid() {
			r.prefix, r.hasPfx = rc.DstPrefix.Prefix, true
		}
		if rc.Port == "" {
			return nil, def, fmt.Errorf("classify: rule %d needs a port (or continue, drop)", i)
		}
		if r.act, err = parseAct(fmt.Sprintf("rule %d", i), rc.Port); err != nil {
			return nil, def, err
		}
		rules = append(rules, r)
	}
	return rules, def, nil
}

func (k *classify) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		l, err := p.ParseLayers()
		act := k.defAct
		if err != nil {
			k.cBad.Inc()
		} else if r := k.match(p.Data(), l); r >= 0 {
			k.cMatch[r].Inc()
			act = k.rules[r].act
		} else {
			k.cDef.Inc()
		}
		switch act.kind {
		case actDrop:
			p.Drop(reasonClassified)
		case actPort:
			p.Forward(act.port)
		}
	}
}

func (k *classify) match(d []byte, l *packet.Layers) int {
	for i := range k.rules {
		r := &k.rules[i]
		// A non-IP frame has no next header: Proto 0 there is not Hop-by-Hop.
		if r.proto >= 0 && (l.IPVersion == 0 || int(l.Proto) != r.proto) {
			continue
		}
		if r.udpDst >= 0 || r.udpSrc >= 0 {
			if l.Flags&packet.FlagUDP == 0 {
				continue
			}
			u := d[l.L4:]
			if r.udpSrc >= 0 && int(binary.BigEndian.Uint16(u[0:])) != r.udpSrc {
				continue
			}
			if r.udpDst >= 0 && int(binary.BigEndian.Uint16(u[2:])) != r.udpDst {
				continue
			}
		}
		if r.hopByHop >= 0 && (l.HopByHop != 0) != (r.hopByHop == 1) {
			continue
		}
		if r.srh >= 0 && (l.Flags&packet.FlagSRH != 0) != (r.srh == 1) {
			continue
		}
		if r.hasPfx {
			var a netip.Addr
			switch {
			case l.Flags&packet.FlagIPv6 != 0:
				a = netip.AddrFrom16([16]byte(d[l.L3+24 : l.L3+40]))
			case l.Flags&packet.FlagIPv4 != 0:
				a = netip.AddrFrom4([4]byte(d[l.L3+16 : l.L3+20]))
			default:
				continue
			}
			if !r.prefix.Contains(a) {
				continue
			}
		}
		return i
	}
	return -1
}
