package external

import "sync/atomic"

// atomicInt is published by the lcore and read by the supervisor.
type atomicInt struct{ v atomic.Int64 }

func (a *atomicInt) Load() int64   { return a.v.Load() }
func (a *atomicInt) Store(v int64) { a.v.Store(v) }
