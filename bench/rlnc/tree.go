package main

import (
	"fmt"
	"strings"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// treeStage is the routing that coding is measured against: store-and-forward
// multicast over an optimal fractional packing of Steiner trees.
//
// A packet's tree is the index in its IPv6 flow label, a convention of this
// bench only. The flow label is outside the UDP checksum (and the
// pseudo-header), so writing it leaves the generator's packet valid for the
// sink. At the source the stage picks each packet's tree by weighted deficit
// round-robin over the trees' weights x_T and writes the label; at every node
// it sends a copy out of each link the packet's tree takes from there. At a
// terminal the packet itself goes on down the chain (to the sink, or the
// fan-out to hosts); elsewhere it takes the last of those links itself.
type treeStage struct {
	out     [][]uint16 // by tree: the ports of the links it takes out of this node
	deliver bool       // a terminal: the packet continues down the chain
	quantum []float64  // source only: each tree's weight over the smallest
	deficit []float64
	cur     int
	pool    packet.Pool

	cCopies, cNoBuf *stats.Counter
}

// Drop reasons of bench.tree. Neither happens when the trees are right.
var (
	reasonNoTree   = packet.RegisterReason("bench_tree_unknown") // not IPv6, or a flow label that names no tree
	reasonTreeLeaf = packet.RegisterReason("bench_tree_leaf")    // the tree ends at a node that is no terminal
)

func init() {
	plugins.Register(plugins.Kind{Name: "bench.tree", Summary: "multicast each packet along the Steiner tree in its flow label (routing baseline)", New: newTree})
}

func newTree(s *plugins.Setup) (plugins.Stage, error) {
	var c struct {
		Out     [][]string `toml:"out"`     // by tree: the ports out of this node
		Weights []float64  `toml:"weights"` // the source: x_T by tree
		Deliver bool       `toml:"deliver"` // a terminal
	}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if len(c.Out) == 0 || len(c.Out) > 1<<20 {
		return nil, fmt.Errorf("bench.tree: %d trees: want 1..2^20 (the flow label holds the index)", len(c.Out))
	}
	f := &treeStage{deliver: c.Deliver,
		cCopies: s.Counters.New("copies", "copies sent down the tree"),
		cNoBuf:  s.Counters.New("no_buffer", "copies not made: pool empty or packet too big")}
	for _, names := range c.Out {
		var ids []uint16
		for _, n := range names {
			pi, ok := s.Ports.Port(n)
			if !ok {
				return nil, fmt.Errorf("bench.tree: no port %q", n)
			}
			ids = append(ids, pi.ID)
		}
		f.out = append(f.out, ids)
	}
	if len(c.Weights) > 0 {
		if len(c.Weights) != len(c.Out) {
			return nil, fmt.Errorf("bench.tree: %d weights for %d trees", len(c.Weights), len(c.Out))
		}
		low := c.Weights[0]
		for _, x := range c.Weights {
			if !(x > 0) {
				return nil, fmt.Errorf("bench.tree: weight %g is not positive", x)
			}
			low = min(low, x)
		}
		// Every tree's quantum is at least one packet, so a visit always
		// sends.
		for _, x := range c.Weights {
			f.quantum = append(f.quantum, x/low)
		}
		f.deficit = make([]float64, len(f.quantum))
		f.deficit[0] = f.quantum[0]
	}
	var err error
	f.pool, err = s.Pool("bench-tree", 16384, 2048)
	return f, err
}

// next is the tree of the source's next packet: deficit round-robin, one
// packet costing 1, so over a round tree T sends in proportion to x_T.
func (f *treeStage) next() int {
	for f.deficit[f.cur] < 1 {
		f.cur++
		if f.cur == len(f.quantum) {
			f.cur = 0
		}
		f.deficit[f.cur] += f.quantum[f.cur]
	}
	f.deficit[f.cur]--
	return f.cur
}

func (f *treeStage) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		l, err := p.ParseLayers()
		if err != nil || l.Flags&packet.FlagIPv6 == 0 {
			p.Drop(reasonNoTree)
			continue
		}
		ip := packet.IPv6(p.Data()[l.L3:])
		tr := int(ip.FlowLabel())
		if f.quantum != nil {
			tr = f.next()
			ip.SetFlowLabel(uint32(tr))
		}
		if tr >= len(f.out) {
			p.Drop(reasonNoTree)
			continue
		}
		ports := f.out[tr]
		last := -1 // the link the packet itself takes
		if !f.deliver {
			if len(ports) == 0 {
				p.Drop(reasonTreeLeaf)
				continue
			}
			last = len(ports) - 1
		}
		// Copies for the other links.
		for j, port := range ports {
			switch {
			case j == last:
			case emitCopy(ctx, f.pool, p, port):
				f.cCopies.Inc()
			default:
				f.cNoBuf.Inc()
			}
		}
		if last >= 0 {
			p.Forward(ports[last])
		}
	}
}

// buildRoutedConfig is buildConfig for routing: the same ports, links and
// sinks, with bench.tree in place of the coding stages. trees are the trees
// of the packing with positive weight and x their weights; the source sends
// frame-byte packets at srcPPS.
func buildRoutedConfig(t topology, p params, trees [][][2]string, x []float64, frame int, srcPPS float64) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	writeNet(&b, t)
	// out lists, by tree, the links the tree takes out of n.
	out := func(n string) string {
		var per []string
		for _, tr := range trees {
			var ports []string
			for _, v := range t.out(n) {
				for _, e := range tr {
					if e == [2]string{n, v} {
						ports = append(ports, fmt.Sprintf("%q", n+"-"+v))
					}
				}
			}
			per = append(per, "["+strings.Join(ports, ", ")+"]")
		}
		return "out = [" + strings.Join(per, ", ") + "]\n"
	}
	// The source. The generator's size counts the 4-byte FCS no buffer holds:
	// frame+4 makes packets of frame bytes, the length of a coded packet, so
	// that both cost a link the same time ((frame+24)·8 bits with preamble,
	// FCS and gap) and goodputs in link packets compare with the LP directly.
	// Routing thus carries CODED IP's header and vector as padding.
	w("[[pipelines]]\nname = \"node-%s\"\nlcores = [0]\n", t.source)
	w("[[pipelines.stages]]\nkind = \"generator\"\nname = \"gen\"\nflows = 1\nsrc = \"2001:db8:1::1\"\ndst = \"2001:db8:2::1\"\n"+
		"udp_src_port = 5000\nudp_dst_port = 6000\nsizes = [%d]\nrate = \"%.0fpps\"\n", frame+4, srcPPS)
	ws := make([]string, len(x))
	for i, v := range x {
		ws[i] = fmt.Sprintf("%.17g", v)
	}
	w("[[pipelines.stages]]\nkind = \"bench.tree\"\nname = \"tree-%s\"\nweights = [%s]\n%s", t.source, strings.Join(ws, ", "), out(t.source))
	writeLinks(&b, t, p)
	for _, n := range t.nodes() {
		if n == t.source {
			continue
		}
		w("[[pipelines]]\nname = \"node-%s\"\nlcores = [0]\nrx = [%q]\n", n, n+".in.rx")
		term := t.isTerminal(n)
		w("[[pipelines.stages]]\nkind = \"bench.tree\"\nname = \"tree-%s\"\ndeliver = %t\n%s", n, term, out(n))
		if term {
			writeDelivery(&b, t, n)
		}
	}
	return b.String()
}
