package appliance

import (
	"fmt"
	"strings"

	"github.com/linerate/linerate/appliance/offload"
)

// composeOffloads hands each stage's offload request (appliance/offload) to
// the rx ports of its pipeline, in the chain's order. A port that hosts
// offloads attaches it; one that cannot declines it: an error with offload =
// "xdp", the stage in Go with "auto". A dry run checks only that the drivers
// could host it.
func (e *Engine) composeOffloads() error {
	perPort := map[*portEntry][]*offload.Request{}
	var order []*portEntry
	var hosted []*offload.Request
	for _, pl := range e.pipelines {
		if len(pl.instances) == 0 {
			continue
		}
		for _, si := range pl.instances[0].stages {
			v, ok := pl.shared[si.name+"/"+offload.Key]
			if !ok {
				continue
			}
			r := v.(*offload.Request)
			e.offloads = append(e.offloads, r)
			if len(pl.rxPorts) == 0 {
				if err := r.Decline(fmt.Sprintf("pipeline %q receives from no port", pl.name)); err != nil {
					return err
				}
			}
			for _, pe := range pl.rxPorts {
				_, host := pe.port.(offload.Host)
				if e.opt.DryRun {
					host = offload.HostDriver(pe.driver)
				}
				if !host {
					why := fmt.Sprintf("rx port %q has driver %q, which cannot run it", pe.name, pe.driver)
					if hd := offload.HostDrivers(); len(hd) > 0 {
						why += fmt.Sprintf(" (driver %s can)", strings.Join(hd, ", "))
					}
					if err := r.Decline(why); err != nil {
						return err
					}
					break
				}
			}
			// What the program needs of the kernel, before a port loads it
			// (a dry run's check is offloadKernel's).
			if r.Reason() == "" && !e.opt.DryRun {
				if err := r.RequireKernel(); err != nil {
					return err
				}
			}
			if r.Reason() != "" {
				e.log.Info("stage runs in Go", "stage", r.Stage, "offload", r.Mode.String(), "why", r.Reason())
				continue
			}
			hosted = append(hosted, r)
			for _, pe := range pl.rxPorts {
				if _, seen := perPort[pe]; !seen {
					order = append(order, pe)
				}
				perPort[pe] = append(perPort[pe], r)
			}
		}
	}
	if e.opt.DryRun {
		return nil
	}
	for _, pe := range order {
		if err := pe.port.(offload.Host).Compose(perPort[pe]); err != nil {
			return fmt.Errorf("%s: port %q: %w", pe.cfgPort.Where(), pe.name, err)
		}
	}
	// A port that could not load a program declined it (auto): said once.
	for _, r := range hosted {
		if r.Reason() != "" {
			e.log.Info("stage runs in Go", "stage", r.Stage, "offload", r.Mode.String(), "why", r.Reason())
		}
	}
	return nil
}
