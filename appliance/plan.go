package appliance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/ports"
)

// hostPlan is Options.Plan where the dry run checks this host, else nil:
// what the ports' drivers get as Setup.Plan.
func (e *Engine) hostPlan() func(ports.Finding) {
	if !e.opt.DryRun || e.opt.Offline {
		return nil
	}
	return e.opt.Plan
}

// offloadNeeds are the kernel features an offload needs: the dispatcher it
// runs in redirects to AF_XDP sockets and walks its slots with bpf_loop, and
// the stage's program needs its own (Program.Needs).
func offloadNeeds(r *offload.Request) []kernel.Feature {
	fs := []kernel.Feature{kernel.XSKMap, kernel.Loop}
	for _, f := range r.Program.Needs() {
		if !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	return fs
}

// offloadKernel, in a dry run that checks this host, declines the offloads
// whose programs need what the kernel lacks, as the verifier would refuse
// them when the port loads them: an error with offload = "xdp", Go with
// "auto". A probe that cannot tell (no privileges) declines nothing.
func (e *Engine) offloadKernel() error {
	if !e.opt.DryRun || e.opt.Offline {
		return nil
	}
	for _, r := range e.offloads {
		if r.Reason() != "" {
			continue
		}
		for _, f := range offloadNeeds(r) {
			if p := kernel.Probe(f); p.State == kernel.Missing {
				if err := r.Decline(p.Err().Error()); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// planOffloads tells Options.Plan, for each stage that asked to run in the
// kernel, whether it will.
func (e *Engine) planOffloads() {
	plan := e.hostPlan()
	if plan == nil {
		return
	}
	for _, r := range e.offloads {
		f := ports.Finding{Subject: fmt.Sprintf("stage %q", r.Stage), Need: "XDP offload", Outcome: ports.AsAsked}
		mode := fmt.Sprintf("offload = %q: ", r.Mode.String())
		if why := r.Reason(); why != "" {
			f.Outcome, f.Detail = ports.FallsBack, mode+"runs in Go: "+why
			if r.Mode == offload.XDP {
				f.Outcome, f.Detail = ports.Fails, mode+why
			}
			plan(f)
			continue
		}
		f.Detail = mode + "runs in the XDP dispatcher of rx port " + strings.Join(e.offloadPorts(r), ", ")
		var unsure []string
		for _, k := range offloadNeeds(r) {
			if p := kernel.Probe(k); p.State == kernel.Unknown {
				unsure = append(unsure, k.String())
			}
		}
		if len(unsure) > 0 {
			f.Detail += "; could not tell whether the kernel offers " + strings.Join(unsure, ", ") +
				" (needs root, or CAP_BPF and CAP_NET_ADMIN)"
		}
		plan(f)
	}
}

// offloadPorts names the rx ports of r's pipeline.
func (e *Engine) offloadPorts(r *offload.Request) []string {
	for _, pl := range e.pipelines {
		if len(pl.instances) == 0 {
			continue
		}
		for _, si := range pl.instances[0].stages {
			if v, ok := pl.shared[si.name+"/"+offload.Key]; ok && v == r {
				var out []string
				for _, pe := range pl.rxPorts {
					out = append(out, fmt.Sprintf("%q", pe.name))
				}
				return out
			}
		}
	}
	return nil
}
