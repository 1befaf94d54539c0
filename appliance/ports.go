package appliance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/ports"
)

type portEntry struct {
	id           uint16
	name         string
	driver       string
	port         ports.Port
	info         ports.Info
	pool         packet.Pool
	poolID       uint16
	ownPoolOnly  bool
	engineStamps bool
	stampTx      bool // the port may read TxTime: stamp every packet
	internal     bool
	// driverRxBytes: the driver stamps rx itself, so rx bytes are the driver's.
	driverRxBytes bool
	// handleTx: the driver transmits from the tx buffer and stamps TxTime itself;
	// tx bytes are then the driver's.
	handleTx ports.HandleTx
	cfgPort  config.Port
	// final is the port's counters and link as they were when the lcores
	// had stopped, read before it closed: a closed port has no kernel
	// socket left to ask, and a counter the kernel resets on each read
	// (afpacket's PACKET_STATISTICS) holds only what came since the last.
	final atomic.Pointer[finalStats]
}

type finalStats struct {
	ports.Stats
	linkUp bool
}

func (e *Engine) openPorts() error {
	for i, pc := range e.cfg.Ports {
		pool := e.pools[pc.Pool]
		if pool == nil {
			return fmt.Errorf("%s: port %q: no pool %q", pc.Where(), pc.Name, pc.Pool)
		}
		txq := pc.TxQueues
		if txq == 0 {
			txq = len(e.lcores)
		}
		pe := &portEntry{id: uint16(i), name: pc.Name, driver: pc.Driver, pool: pool, poolID: pool.ID(), cfgPort: pc}
		name := pc.Name
		mtu := 0 // left out: the device keeps its own
		if pc.MTUSet() {
			mtu = pc.MTU
		}
		s := &ports.Setup{Name: pc.Name, Config: pc.Table, Pool: pool, RxQueues: pc.RxQueues, TxQueues: txq,
			Clock: e.clock, Log: e.log.With("port", pc.Name), DryRun: e.opt.DryRun, Offline: e.opt.Offline, Section: e.section,
			Lcores: e.rt.lcoreCPUs, MTU: mtu, Plan: e.hostPlan(),
			Warn: func(msg string) { e.driverWarnings = append(e.driverWarnings, fmt.Sprintf("port %q: %s", name, msg)) }}
		if err := knownDriver(pc); err != nil {
			return err
		}
		p, err := ports.Open(pc.Driver, s)
		if err != nil {
			return located(err, pc.Where(), fmt.Sprintf("port %q", pc.Name))
		}
		if e.opt.DryRun {
			pe.info = ports.Info{Driver: pc.Driver, RxQueues: pc.RxQueues, TxQueues: txq, MTU: pc.MTU}
		} else {
			pe.port = p
			pe.info = p.Info()
			// A port with buffers of its own (DPDK mbufs) receives into them, and
			// packets emitted towards it come from them.
			if own := p.Pool(); own != nil && own != pool {
				pe.pool, pe.poolID = own, own.ID()
				if _, dup := e.pools[own.Name()]; !dup {
					e.pools[own.Name()] = own
				}
			}
			if pe.info.TxQueues < len(e.lcores) {
				return fmt.Errorf("%s: port %q has %d tx queues; each of the %d lcores needs its own",
					pc.Where(), pc.Name, pe.info.TxQueues, len(e.lcores))
			}
		}
		if pe.info.MTU == 0 {
			pe.info.MTU = pc.MTU
		}
		pe.ownPoolOnly = pe.info.OwnPoolOnly
		pe.engineStamps = pe.info.TimestampSource == "" || pe.info.TimestampSource == "engine"
		_, pe.internal = p.(interface{ InFlight() int })
		// A mem link's peer stamps its own rx and the null port discards:
		// neither reads a packet's TxTime, so the engine need not read the
		// clock to transmit to them (but for a packet that asked for its
		// transit delay).
		pe.stampTx = !pe.internal && pc.Driver != "null"
		e.ports = append(e.ports, pe)
		e.portIndex[pc.Name] = pe
	}
	if e.opt.DryRun {
		return nil
	}
	lookup := func(name string) ports.Port {
		if pe := e.portIndex[name]; pe != nil {
			return pe.port
		}
		return nil
	}
	for _, pe := range e.ports {
		if j, ok := pe.port.(ports.Joiner); ok {
			if err := j.Join(lookup); err != nil {
				return fmt.Errorf("%s: %w", pe.cfgPort.Where(), err)
			}
			pe.info = pe.port.Info()
			if pe.info.MTU == 0 {
				pe.info.MTU = pe.cfgPort.MTU // as above: the re-read must not lose it
			}
		}
	}
	return nil
}

// section hands a driver its top-level section (config.RegisterSection).
func (e *Engine) section(name string) ports.Config { return e.cfg.Section(name) }

// checkRx makes sure every rx queue has exactly one poller.
func (e *Engine) checkRx() error {
	seen := map[string]string{}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, rq := range in.rx {
				key := fmt.Sprintf("%s:%d", rq.port.name, rq.queue)
				if other, dup := seen[key]; dup {
					return fmt.Errorf("rx queue %s is polled by both pipeline %q and %q", key, other, pl.name)
				}
				seen[key] = pl.name
			}
		}
	}
	return nil
}

type portResolver struct{ e *Engine }

func (r portResolver) Port(name string) (plugins.PortInfo, bool) {
	pe := r.e.portIndex[name]
	if pe == nil {
		return plugins.PortInfo{}, false
	}
	return pe.pluginInfo(), true
}

func (r portResolver) All() []plugins.PortInfo {
	out := make([]plugins.PortInfo, 0, len(r.e.ports))
	for _, pe := range r.e.ports {
		out = append(out, pe.pluginInfo())
	}
	return out
}

func (pe *portEntry) pluginInfo() plugins.PortInfo {
	pi := plugins.PortInfo{ID: pe.id, Name: pe.name, Pool: pe.pool, MTU: pe.info.MTU, MAC: pe.info.MAC, Queue: pe.info.RxQueues,
		Internal: pe.internal, DriverMAC: pe.info.MAC, IfID: pe.cfgPort.IfID, Ifindex: pe.info.Ifindex}
	if m := pe.cfgPort.MAC; m != (config.MAC{}) {
		pi.MAC = m
	}
	for _, a := range pe.cfgPort.Addresses {
		pi.Addrs = append(pi.Addrs, a.Prefix)
	}
	return pi
}

// knownDriver checks that this binary has pc's driver, suggesting the closest
// it has.
func knownDriver(pc config.Port) error {
	have := ports.Drivers()
	if slices.Contains(have, pc.Driver) {
		return nil
	}
	msg := fmt.Sprintf("%s: port %q: unknown driver %q", pc.Where(), pc.Name, pc.Driver)
	if best := config.Suggest(pc.Driver, have); best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	msg += "; this binary has " + strings.Join(have, ", ")
	if where, ok := ports.Absent(pc.Driver); ok {
		msg += "; " + where
	}
	return errors.New(msg)
}
