package appliance

import (
	"errors"
	"fmt"
	"time"
)

// Do runs fn on lcore id between two loops and waits for it. A stopped lcore
// runs it on the caller.
func (e *Engine) Do(id int, fn func()) error {
	if id < 0 || id >= len(e.lcores) {
		return fmt.Errorf("engine: no lcore %d", id)
	}
	lc := e.lcores[id]
	if e.phase.Load() != phaseRun || e.opt.Manual || lc.stopped.Load() {
		fn()
		return nil
	}
	c := &command{fn: fn, done: make(chan struct{})}
	lc.cmdMu.Lock()
	for !lc.cmds.Put(c) {
		time.Sleep(10 * time.Microsecond)
	}
	lc.cmdMu.Unlock()
	select {
	case <-c.done:
		return nil
	case <-e.done:
		return errors.New("engine: stopped")
	}
}

// Synchronize waits until every running lcore has passed a quiescent point (the
// end of a loop) after the call. A table published before it through an atomic
// pointer is then seen by every lcore, and the one it replaced by none.
func (e *Engine) Synchronize() {
	if e.opt.Manual || e.phase.Load() != phaseRun {
		return
	}
	// Announced before the marks: a bump after a mark is at the end of a loop
	// that ends after the call.
	for _, lc := range e.lcores {
		lc.syncs.Add(1)
		defer lc.syncs.Add(-1)
	}
	marks := make([]uint64, len(e.lcores))
	for i, lc := range e.lcores {
		marks[i] = lc.epoch.Load()
	}
	for i, lc := range e.lcores {
		for lc.epoch.Load() <= marks[i] && !lc.stopped.Load() {
			time.Sleep(20 * time.Microsecond)
		}
	}
}
