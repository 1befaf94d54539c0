package builtin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// Where a packet went, as the tests write it.
const (
	toContinue = "continue"
	toDrop     = "drop"
)

// classifyCase: one rule set, then packets and where each must go ("continue",
// "drop", or a port name), and which counter each must bump.
type classifyCase struct {
	name string
	keys string
	pkts []classifyPkt
}

type classifyPkt struct {
	f       frame
	raw     []byte // instead of f
	to      string
	counter string // "rule0", "default", "unparsed"
}

var portByName = map[string]uint16{"eth0": portEth0, "eth1": portEth1, "ring0": portRing0}

func TestClassify(t *testing.T) {
	v6 := func(mod func(*frame)) frame {
		f := udp6(1000, 2000)
		if mod != nil {
			mod(&f)
		}
		return f
	}
	v4 := func(mod func(*frame)) frame {
		f := frame{v4: true, src: "192.0.2.1", dst: "198.51.100.1", sport: 1000, dport: 2000, payload: 20}
		if mod != nil {
			mod(&f)
		}
		return f
	}
	arp := frame{etherType: packet.EtherTypeARP}
	truncated := v6(nil).bytes()[:14+30]
	cases := []classifyCase{
		{name: "next_header", keys: `
[[rules]]
next_header = 58
port = "eth1"
[[rules]]
next_header = 17
port = "ring0"`, pkts: []classifyPkt{
			{f: v6(nil), to: "ring0", counter: "rule1"},
			{f: v6(func(f *frame) { f.proto = 58 }), to: "eth1", counter: "rule0"},
			{f: v4(nil), to: "ring0", counter: "rule1"},
			{f: v4(func(f *frame) { f.proto = 6 }), to: toContinue, counter: "default"},
			{f: v6(func(f *frame) { f.hbh, f.srh = true, 2 }), to: "ring0", counter: "rule1"}, // the upper layer, past the extension headers
		}},
		{name: "next_header 0 matches no non-IP frame", keys: `
rules = [{ next_header = 0, port = "eth1" }]`, pkts: []classifyPkt{
			{f: arp, to: toContinue, counter: "default"},
			{f: v4(func(f *frame) { f.proto = 255 }), to: toContinue, counter: "default"},
		}},
		{name: "udp ports", keys: `
[[rules]]
udp_dst_port = 862
port = "ring0"
[[rules]]
udp_src_port = 862
port = "eth0"
[[rules]]
udp_src_port = 5
udp_dst_port = 6
port = "eth1"`, pkts: []classifyPkt{
			{f: v6(func(f *frame) { f.dport = 862 }), to: "ring0", counter: "rule0"},
			{f: v4(func(f *frame) { f.dport = 862 }), to: "ring0", counter: "rule0"},
			{f: v6(func(f *frame) { f.sport = 862 }), to: "eth0", counter: "rule1"},
			{f: v6(func(f *frame) { f.sport, f.dport = 5, 6 }), to: "eth1", counter: "rule2"},
			{f: v6(func(f *frame) { f.sport, f.dport = 5, 7 }), to: toContinue, counter: "default"},
			{f: v6(func(f *frame) { f.sport, f.dport = 6, 5 }), to: toContinue, counter: "default"},
			// Not UDP: port rules never match, even when the bytes are there.
			{f: v6(func(f *frame) { f.proto, f.payload = 6, 40 }), to: toContinue, counter: "default"},
			{f: arp, to: toContinue, counter: "default"},
		}},
		{name: "dst_prefix", keys: `
[[rules]]
dst_prefix = "2001:db8:2::/48"
port = "eth0"
[[rules]]
dst_prefix = "198.51.100.0/24"
port = "eth1"
[[rules]]
dst_prefix = "::/0"
port = "ring0"`, pkts: []classifyPkt{
			{f: v6(nil), to: "eth0", counter: "rule0"},
			{f: v6(func(f *frame) { f.dst = "2001:db8:3::1" }), to: "ring0", counter: "rule2"},
			{f: v4(nil), to: "eth1", counter: "rule1"},
			{f: v4(func(f *frame) { f.dst = "198.51.101.1" }), to: toContinue, counter: "default"}, // ::/0 holds no IPv4
			{f: v6(func(f *frame) { f.dst = "::ffff:198.51.100.1" }), to: "ring0", counter: "rule2"},
			{f: arp, to: toContinue, counter: "default"},
		}},
		{name: "hop_by_hop and srh", keys: `
[[rules]]
hop_by_hop = true
srh = true
port = "eth0"
[[rules]]
hop_by_hop = true
port = "eth1"
[[rules]]
srh = true
port = "ring0"
[[rules]]
hop_by_hop = false
srh = false
next_header = 17
port = "drop"`, pkts: []classifyPkt{
			{f: v6(func(f *frame) { f.hbh, f.srh = true, 3 }), to: "eth0", counter: "rule0"},
			{f: v6(func(f *frame) { f.hbh = true }), to: "eth1", counter: "rule1"},
			{f: v6(func(f *frame) { f.srh = 1 }), to: "ring0", counter: "rule2"},
			{f: v6(func(f *frame) { f.vlan = 9; f.srh = 1 }), to: "ring0", counter: "rule2"},
			{f: v6(nil), to: toDrop, counter: "rule3"},
			{f: v4(nil), to: toDrop, counter: "rule3"},
			{f: v6(func(f *frame) { f.proto = 59 }), to: toContinue, counter: "default"},
		}},
		{name: "first match wins", keys: `
[[rules]]
udp_dst_port = 2000
port = "continue"
[[rules]]
next_header = 17
port = "eth1"
[[rules]]
dst_prefix = "2001:db8::/32"
port = "eth0"`, pkts: []classifyPkt{
			{f: v6(nil), to: toContinue, counter: "rule0"},
			{f: v6(func(f *frame) { f.dport = 1 }), to: "eth1", counter: "rule1"},
			{f: v6(func(f *frame) { f.proto = 6 }), to: "eth0", counter: "rule2"},
		}},
		{name: "default continue", keys: `rules = [{ udp_dst_port = 9, port = "eth0" }]`, pkts: []classifyPkt{
			{f: v6(nil), to: toContinue, counter: "default"},
			{f: v6(func(f *frame) { f.dport = 9 }), to: "eth0", counter: "rule0"},
			{raw: truncated, to: toContinue, counter: "unparsed"},
			{raw: make([]byte, 5), to: toContinue, counter: "unparsed"},
		}},
		{name: "default drop", keys: "default = \"drop\"\nrules = [{ udp_dst_port = 9, port = \"eth0\" }]", pkts: []classifyPkt{
			{f: v6(nil), to: toDrop, counter: "default"},
			{f: v4(func(f *frame) { f.dport = 9 }), to: "eth0", counter: "rule0"},
			{raw: truncated, to: toDrop, counter: "unparsed"},
			{f: arp, to: toDrop, counter: "default"},
		}},
		{name: "default port", keys: "default = \"ring0\"\nrules = [{ udp_dst_port = 9, port = \"drop\" }]", pkts: []classifyPkt{
			{f: v6(nil), to: "ring0", counter: "default"},
			{f: v6(func(f *frame) { f.dport = 9 }), to: toDrop, counter: "rule0"},
			{raw: truncated, to: "ring0", counter: "unparsed"},
			// A UDP length past the IP payload does not parse.
			{raw: func() []byte { b := v4(nil).bytes(); b[14+20+5] = 200; return b }(), to: "ring0", counter: "unparsed"},
		}},
		{name: "no rules", keys: ``, pkts: []classifyPkt{
			{f: v6(nil), to: toContinue, counter: "default"},
			{raw: truncated, to: toContinue, counter: "unparsed"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			st := h.mustBuild("classify", c.keys)
			want := map[string]uint64{}
			for _, n := range h.CounterNames() {
				want[n] = 0
			}
			b := &packet.Burst{}
			for _, p := range c.pkts {
				raw := p.raw
				if raw == nil {
					raw = p.f.bytes()
				}
				b.Push(h.Pkt(raw, portEth0))
				want[p.counter]++
			}
			handles := append([]packet.Handle(nil), b.Handles()...)
			o := h.run(b, st)
			defer o.Free()
			// Where did each go? Dropped packets are freed; they are the rest.
			where := map[packet.Handle]string{}
			for _, f := range o.Forwarded {
				where[f.H] = fmt.Sprint(f.Port)
			}
			for _, hd := range o.Continued {
				where[hd] = toContinue
			}
			drops := 0
			for i, p := range c.pkts {
				got, ok := where[handles[i]]
				if !ok {
					got = toDrop
					drops++
				}
				exp := p.to
				if id, ok := portByName[p.to]; ok {
					exp = fmt.Sprint(id)
				}
				if got != exp {
					t.Errorf("packet %d: went to %s, want %s (port ids: %v)", i, got, exp, portByName)
				}
			}
			if o.Dropped["classify_drop"] != drops || len(o.Dropped) > 1 {
				t.Errorf("dropped %v, want %d as classify_drop", o.Dropped, drops)
			}
			for name, v := range want {
				if got := h.Counter(name); got != v {
					t.Errorf("counter %s = %d, want %d", name, got, v)
				}
			}
		})
	}
}

// TestClassifyLayersKept: the parse stays in the packet for later stages.
func TestClassifyLayersKept(t *testing.T) {
	h := newHarness(t)
	st := h.mustBuild("classify", "")
	o := h.run(h.Burst(portEth0, frame{src: "2001:db8::1", dst: "2001:db8::2", hbh: true, srh: 2, sport: 7, dport: 8}.bytes()), st)
	defer o.Free()
	p := o.Continued[0].P()
	if !p.LayersValid() {
		t.Fatal("classify left no valid Layers record")
	}
	l := p.Layers()
	if l.Flags&(packet.FlagIPv6|packet.FlagSRH|packet.FlagUDP) != packet.FlagIPv6|packet.FlagSRH|packet.FlagUDP || l.HopByHop != 54 || l.Routing != 62 {
		t.Errorf("Layers: flags %#x, hop-by-hop at %d, routing at %d", l.Flags, l.HopByHop, l.Routing)
	}
}

func TestClassifyConfigErrors(t *testing.T) {
	for _, c := range []struct{ keys, want string }{
		{`default = "eth9"`, `classify: default: no port "eth9" (or use continue, drop)`},
		{`rules = [{ next_header = 17 }]`, "classify: rule 0 needs a port"},
		{"[[rules]]\nport = \"eth0\"\n[[rules]]\nport = \"nowhere\"", `classify: rule 1: no port "nowhere"`},
		{`rules = [{ next_header = 256, port = "eth0" }]`, "next_header 256 is outside 0..255"},
		{`rules = [{ udp_dst_port = -1, port = "eth0" }]`, "udp_dst_port -1 is outside 0..65535"},
		{`rules = [{ udp_src_port = 65536, port = "eth0" }]`, "udp_src_port 65536 is outside 0..65535"},
		{`rules = [{ dst_prefix = "10.0.0.1/8", port = "eth0" }]`, "has host bits set"},
		{"[[rules]]\nport = \"eth0\"\nsrh = 1", "classify#0.toml:3: rules[0].srh"},
		{"[[rules]]\nport = \"eth0\"\nhop_by_hop = true\nioam = true", "classify#0.toml:4: rules[0].ioam: unknown key"},
	} {
		h := newHarness(t)
		if _, err := h.build("classify", c.keys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.keys, err, c.want)
		}
	}
}

// TestClassifyReload: a reload changes the rules' matches and actions and the
// default, from the next burst; a new number of rules, or a bad rule, is
// refused and changes nothing.
func TestClassifyReload(t *testing.T) {
	h := newHarness(t)
	st := h.mustBuild("classify", "rules = [{ udp_dst_port = 2000, port = \"eth1\" }]")
	to := func() string {
		o := h.run(h.Burst(portEth0, udp6(1000, 2000).bytes()), st)
		defer o.Free()
		switch {
		case len(o.Forwarded) == 1:
			return fmt.Sprint(o.Forwarded[0].Port)
		case len(o.Continued) == 1:
			return toContinue
		}
		return toDrop
	}
	if got := to(); got != fmt.Sprint(portEth1) {
		t.Fatalf("before the reload: went to %s, want eth1", got)
	}
	if err := h.Reload(st, "default = \"drop\"\nrules = [{ udp_dst_port = 2001, port = \"ring0\" }]"); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := to(); got != toDrop {
		t.Errorf("after the reload: went to %s, want the new default, drop", got)
	}
	for _, c := range []struct{ keys, want string }{
		{"rules = [{ port = \"eth0\" }, { port = \"eth1\" }]", "classify: 2 rules: the number of rules changes only with a restart (it is 1"},
		{"rules = [{ udp_dst_port = 2000, port = \"eth9\" }]", `classify: rule 0: no port "eth9"`},
		{"rules = [{ udp_dst_port = 2000, port = \"eth1\" }]\nsrh = true", "reload.toml:2: srh: unknown key"},
	} {
		if err := h.Reload(st, c.keys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("reload %q: %v, want %q", c.keys, err, c.want)
		}
	}
	if got := to(); got != toDrop {
		t.Errorf("a refused reload changed the stage: went to %s, want drop", got)
	}
	if h.Counter("default") != 2 || h.Counter("rule0") != 1 {
		t.Errorf("counters default %d, rule0 %d; want 2 and 1", h.Counter("default"), h.Counter("rule0"))
	}
}
