package appliance

import (
	"errors"
	"sync"
	"time"

	"github.com/linerate/linerate/ports"
)

// DrainTimeout bounds how long Stop waits for in-flight packets.
const DrainTimeout = 3 * time.Second

// Stop stops the engine gracefully: sources stop, in-flight packets run to the
// end of their chains, then the lcores stop, stages free what they hold and the
// ports close. Safe to call more than once and from any goroutine.
func (e *Engine) Stop() {
	e.stopOnce.Do(func() {
		if e.phase.Load() == phaseNew {
			e.phase.Store(phaseStop)
			e.release()
			close(e.done)
			return
		}
		e.phase.Store(phaseDrain)
		if e.opt.Manual {
			for i := 0; i < 100000; i++ {
				if e.Step() == 0 && e.quiet() {
					break
				}
			}
		} else {
			deadline := time.Now().Add(DrainTimeout)
			quiet := 0
			for time.Now().Before(deadline) && quiet < 3 {
				time.Sleep(time.Millisecond)
				if e.quiet() {
					quiet++
				} else {
					quiet = 0
				}
			}
		}
		e.phase.Store(phaseStop)
		if e.opt.Manual {
			e.manualMu.Lock()
			for _, lc := range e.lcores {
				lc.shutdown()
			}
			e.manualMu.Unlock()
		}
		e.wg.Wait()
		e.release()
		close(e.done)
	})
}

// release closes ports and frees what they still hold. Pools stay mapped until
// Close so that stats remain readable.
func (e *Engine) release() {
	if e.closed {
		return
	}
	e.closed = true
	// Stages' programs leave the dispatchers before the ports close them.
	for _, r := range e.offloads {
		_ = r.Close()
	}
	// Ports that say so close at once (ports.ParallelCloser), the others
	// one after another.
	var wg sync.WaitGroup
	for _, pe := range e.ports {
		if pe.port == nil {
			continue
		}
		if d, ok := pe.port.(interface{ Drain() int }); ok {
			d.Drain()
		}
		// The summary's counters are these: the lcores have stopped, and
		// the port is still open.
		pe.final.Store(&finalStats{Stats: pe.port.Stats(), linkUp: pe.port.Info().LinkUp})
		closePort := func() {
			if err := pe.port.Close(); err != nil {
				e.log.Warn("close port", "port", pe.name, "err", err)
			}
		}
		if _, ok := pe.port.(ports.ParallelCloser); ok {
			wg.Go(closePort)
		} else {
			closePort()
		}
	}
	wg.Wait()
	if e.ownClk != nil {
		e.ownClk.Close()
	}
}

// Close stops the engine if needed and unmaps its pools. It reports buffers that
// were never returned: every buffer goes back to its pool.
func (e *Engine) Close() error {
	e.Stop()
	var errs []error
	for _, s := range e.ownPools {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	e.ownPools = nil
	return errors.Join(errs...)
}

// InUse is the number of buffers out of the engine's pools.
func (e *Engine) InUse() map[string]int {
	out := map[string]int{}
	for name, p := range e.pools {
		out[name] = p.Stats().InUse
	}
	return out
}
