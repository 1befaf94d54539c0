package appliance

import (
	"fmt"

	"github.com/linerate/linerate/appliance/cpuset"
)

// lcoreCPUs is the ordered set of CPUs the pipelines run on. A pipeline without
// lcores runs on the last CPU the process may use.
func (e *Engine) lcoreCPUs() ([]int, error) {
	allowed := cpuset.Allowed()
	def := allowed[len(allowed)-1]
	seen := map[int]bool{}
	var out []int
	for _, p := range e.cfg.Pipelines {
		list := p.CPUs
		if len(list) == 0 {
			list = []int{def}
		}
		for _, c := range list {
			if c < 0 {
				return nil, fmt.Errorf("%s: pipeline %q: lcore %d is not a CPU", p.Where(), p.Name, c)
			}
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		out = []int{def}
	}
	return out, nil
}

func controlCPUs(cfg, lcores []int) []int {
	if len(cfg) > 0 {
		return cfg
	}
	used := map[int]bool{}
	for _, c := range lcores {
		used[c] = true
	}
	var out []int
	all := cpuset.Allowed()
	for _, c := range all {
		if !used[c] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

func (e *Engine) lcoreByCPU(cpu int) *lcore {
	for _, lc := range e.lcores {
		if lc.cpu == cpu {
			return lc
		}
	}
	return nil
}
