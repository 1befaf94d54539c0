package appliance

import (
	"fmt"
	"strings"

	"github.com/linerate/linerate/appliance/packet"
)

// buildPools makes the engine's slab pools, shared (memfd-backed): an
// external stage lends their buffers to a plugin process without a copy.
func (e *Engine) buildPools() error {
	for _, pc := range e.cfg.Pools {
		s, err := packet.NewSlab(packet.SlabConfig{Name: pc.Name, Buffers: pc.Buffers, DataRoom: pc.DataRoom, Headroom: pc.Headroom, Shared: !pc.Private})
		if err != nil {
			return fmt.Errorf("%s: %w", pc.Where(), err)
		}
		e.pools[pc.Name] = s
		e.ownPools = append(e.ownPools, s)
	}
	if _, ok := e.pools["default"]; !ok {
		s, err := packet.NewSlab(packet.SlabConfig{Name: "default", Buffers: 16384, Shared: true})
		if err != nil {
			return err
		}
		e.pools["default"] = s
		e.ownPools = append(e.ownPools, s)
	}
	return nil
}

// stagePool finds or makes a named pool for stages that keep packets.
// "port:NAME" is the pool port NAME receives into: a DPDK port's own mbufs,
// which it transmits without a copy.
func (e *Engine) stagePool(name string, buffers, dataRoom int) (packet.Pool, error) {
	if p, ok := e.pools[name]; ok {
		return p, nil
	}
	if port, ok := strings.CutPrefix(name, "port:"); ok {
		for _, pe := range e.ports {
			if pe.name == port && pe.pool != nil {
				return pe.pool, nil
			}
		}
		return nil, fmt.Errorf("no port %q", port)
	}
	s, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, DataRoom: dataRoom, Shared: true})
	if err != nil {
		return nil, err
	}
	e.pools[name] = s
	e.ownPools = append(e.ownPools, s)
	return s, nil
}
