// Package offloadtest is a stage with an in-kernel offload, for the tests and
// benchmarks of the offload mechanism, and the smallest example of one:
// "test.macswap" swaps the Ethernet addresses of every frame (or of UDP
// datagrams to udp_port) and sends it back out of the port it came in on,
// in the kernel (bpf/macswap.c) where its offload key allows, in Go
// otherwise. A test binary gets it with a blank import.
//
// Keys:
//
//	offload  = "auto"   # off | xdp | auto
//	udp_port = 0        # 0: every frame; otherwise UDP to this port only
package offloadtest

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "test.macswap", Summary: "swap Ethernet addresses and send back (offload test)", New: newStage})
}

// Spec is the offload's collection, with udpPort set (0: every frame).
func Spec(udpPort uint16) (*ebpf.CollectionSpec, error) {
	spec, err := loadMacswap()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables[macswapVarUdpPort].Set(udpPort); err != nil {
		return nil, err
	}
	return spec, nil
}

// Names of the programs in Spec's collection.
const (
	Slot  = macswapProgMacswapSlot // the extension, for attaching
	Plain = macswapProgMacswapXdp  // the plain XDP program, for prog.Run
)

// CounterNames name the program's counters map by index.
var CounterNames = []string{"swapped", "skipped"}

// Stage is a test.macswap instance.
type Stage struct {
	port    uint16
	req     *offload.Request
	swapped *stats.Counter
}

type config struct {
	Offload string `toml:"offload"`
	UDPPort int    `toml:"udp_port"`
}

func newStage(s *plugins.Setup) (plugins.Stage, error) {
	var c config
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	mode, err := offload.ParseMode(c.Offload)
	if err != nil {
		return nil, err
	}
	if c.UDPPort < 0 || c.UDPPort > 65535 {
		return nil, fmt.Errorf("udp_port %d is outside 0..65535", c.UDPPort)
	}
	st := &Stage{port: uint16(c.UDPPort), swapped: s.Counters.New("swapped", "frames swapped and sent back in Go")}
	if mode != offload.Off {
		spec, err := Spec(st.port)
		if err != nil {
			return nil, err
		}
		st.req, err = offload.Ask(s.Shared, s.Name, s.Config.Where(), mode, offload.Program{Spec: spec, Slot: Slot})
		if err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Request is the stage's offload request, nil with offload = "off".
func (st *Stage) Request() *offload.Request { return st.req }

// Process does in Go what the program does in the kernel, for what comes up.
func (st *Stage) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		d := p.Data()
		if len(d) < 14 || !Wanted(d, st.port) {
			continue
		}
		var tmp [6]byte
		copy(tmp[:], d[0:6])
		copy(d[0:6], d[6:12])
		copy(d[6:12], tmp[:])
		st.swapped.Inc()
		p.Forward(p.InPort)
	}
}

// Wanted is the program's choice of frames, in Go.
func Wanted(d []byte, port uint16) bool {
	if port == 0 {
		return true
	}
	if len(d) < 14 {
		return false
	}
	var udp []byte
	switch binary.BigEndian.Uint16(d[12:14]) {
	case 0x86dd:
		if len(d) < 14+40 || d[14+6] != 17 {
			return false
		}
		udp = d[14+40:]
	case 0x0800:
		if len(d) < 14+20 || d[14+9] != 17 {
			return false
		}
		udp = d[14+int(d[14]&0xf)*4:]
	default:
		return false
	}
	return len(udp) >= 8 && binary.BigEndian.Uint16(udp[2:4]) == port
}
