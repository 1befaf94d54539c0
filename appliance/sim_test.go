package appliance_test

import "github.com/linerate/linerate/appliance/clock"

func newSimClock() *clock.Sim { return clock.NewSim(1_700_000_000_000_000_000) }
