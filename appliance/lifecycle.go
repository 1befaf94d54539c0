package appliance

import (
	"errors"
	"fmt"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports"
)

// Start applies the runtime settings and starts every lcore.
func (e *Engine) Start() error {
	if e.opt.DryRun {
		return errors.New("engine: a dry-run engine cannot start")
	}
	if !e.phase.CompareAndSwap(phaseNew, phaseRun) {
		return errors.New("engine: already started")
	}
	e.started = time.Now()
	for _, pe := range e.ports {
		if s, ok := pe.port.(ports.Starter); ok {
			if err := s.Start(e.clock); err != nil {
				return fmt.Errorf("port %q: %w", pe.name, err)
			}
		}
	}
	if err := e.rt.apply(); err != nil {
		return err
	}
	e.askStamping()
	if e.opt.Manual {
		for _, lc := range e.lcores {
			for _, in := range lc.instances {
				if err := in.start(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, lc := range e.lcores {
		started := make(chan error, 1)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			lc.run(started)
		}()
		if err := <-started; err != nil {
			e.phase.Store(phaseStop)
			e.wg.Wait()
			return err
		}
	}
	go e.watch()
	return nil
}

// askStamping lets drivers that can stamp rx packets in their own pass do so,
// when the engine's clock is the host's monotonic clock they stamp with.
func (e *Engine) askStamping() {
	if _, host := e.clock.(*clock.System); !host {
		return
	}
	for _, pe := range e.ports {
		if h, ok := pe.port.(ports.HandleTx); ok {
			pe.handleTx = h
		}
	}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for i := range in.rx {
				rq := &in.rx[i]
				if s, ok := rq.port.port.(ports.RxStamper); ok && rq.port.engineStamps {
					rq.stamped = s.StampRx(rq.queue, rq.port.id)
					rq.port.driverRxBytes = rq.port.driverRxBytes || rq.stamped
				}
			}
		}
	}
}

// Step runs one loop iteration of every lcore on the calling goroutine. Only for
// engines built with Manual, in virtual time.
func (e *Engine) Step() int {
	moved := 0
	for i := range e.lcores {
		moved += e.StepLcore(i)
	}
	return moved
}

// StepLcore runs one loop iteration of the i-th lcore (lcores in the order the
// pipelines first name them) on the calling goroutine, for Manual engines whose
// caller times one lcore apart from the others (a device under test beside its
// traffic source). It returns 0 for an i out of range.
func (e *Engine) StepLcore(i int) int {
	if i < 0 || i >= len(e.lcores) {
		return 0
	}
	lc := e.lcores[i]
	e.manualMu.Lock()
	defer e.manualMu.Unlock()
	if packet.Checked {
		defer lc.explain()
	}
	return lc.step(e.clock.Now(), e.phase.Load() == phaseDrain)
}

// Done is closed when the engine has stopped.
func (e *Engine) Done() <-chan struct{} { return e.done }

// watch stops the engine by itself when every finite source is done and nothing
// is in flight (a pcap replayed once, a generator with a count).
func (e *Engine) watch() {
	if !e.autoExit() {
		return
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
		}
		if e.phase.Load() != phaseRun {
			return
		}
		if e.sourcesDone() && e.quiet() {
			quiet++
		} else {
			quiet = 0
		}
		if quiet >= 3 {
			e.log.Info("every finite input is done; stopping")
			go e.Stop()
			return
		}
	}
}

// autoExit: the engine has at least one finite source and no endless one.
func (e *Engine) autoExit() bool {
	finite := 0
	polled := map[*portEntry]bool{}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, rq := range in.rx {
				polled[rq.port] = true
			}
			for _, k := range in.producers {
				s := in.stages[k]
				if s.holder != nil && s.finite == nil {
					continue // a delay line: not a source
				}
				if s.finite == nil {
					return false
				}
				finite++
			}
		}
	}
	for pe := range polled {
		if pe.internal {
			continue
		}
		if _, ok := pe.port.(ports.Finite); !ok {
			return false
		}
		finite++
	}
	return finite > 0
}

func (e *Engine) sourcesDone() bool {
	for _, pe := range e.ports {
		if f, ok := pe.port.(ports.Finite); ok && !f.Done() {
			return false
		}
	}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, s := range in.stages {
				if s.finite != nil && !s.finite.Done() {
					return false
				}
			}
		}
	}
	return true
}

// quiet: every lcore's last loop moved nothing and held nothing, and no mem ring
// carries a packet.
func (e *Engine) quiet() bool {
	for _, lc := range e.lcores {
		if !lc.idle.Load() && !lc.stopped.Load() {
			return false
		}
	}
	for _, pe := range e.ports {
		if m, ok := pe.port.(interface{ InFlight() int }); ok && m.InFlight() > 0 {
			return false
		}
	}
	return true
}
