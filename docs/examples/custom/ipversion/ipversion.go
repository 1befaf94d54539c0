// Package ipversion is a stage kept outside linerate's tree, as a custom
// build's would be: example.ipversion counts the packets of each IP version,
// by the EtherType after any VLAN tags, and lets every packet continue.
// docs/examples/custom/main.go links it into a linerate binary.
package ipversion

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// Kind is the stage's kind in a config's [[pipelines.stages]].
const Kind = "example.ipversion"

func init() {
	plugins.Register(plugins.Kind{Name: Kind, Summary: "count packets by IP version (an out-of-tree example)", New: New})
}

// Stage is one lcore's instance of example.ipversion.
type Stage struct {
	ipv4, ipv6, other *stats.Counter
}

// New makes the stage from its config table, which has no keys.
func New(s *plugins.Setup) (plugins.Stage, error) {
	var none struct{}
	if err := s.Config.Decode(&none); err != nil {
		return nil, err
	}
	return &Stage{
		ipv4:  s.Counters.New("ipv4", "IPv4 packets"),
		ipv6:  s.Counters.New("ipv6", "IPv6 packets"),
		other: s.Counters.New("other", "packets neither IPv4 nor IPv6, or too short to tell"),
	}, nil
}

// Process counts the burst's packets; each one continues to the next stage.
func (st *Stage) Process(_ *plugins.Context, b *packet.Burst) {
	var v4, v6, other uint64
	for i := 0; i < b.N; i++ {
		eth := packet.Ethernet(b.H[i].P().Data())
		if !eth.IsValid() {
			other++
			continue
		}
		switch eth.EtherType() {
		case packet.EtherTypeIPv4:
			v4++
		case packet.EtherTypeIPv6:
			v6++
		default:
			other++
		}
	}
	// Once per burst: a counter is the lcore's own, published by the engine.
	st.ipv4.Add(v4)
	st.ipv6.Add(v6)
	st.other.Add(other)
}
