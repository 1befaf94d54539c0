package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// machine is where the figures come from. A figure means little without it:
// GFNI and AVX-512 decide gf's kernels, and a shared machine's load
// decides how far two runs differ.
type machine struct {
	CPUModel  string          `json:"cpu_model"`           // /proc/cpuinfo's model name
	CPUBrand  string          `json:"cpu_brand,omitempty"` // CPUID's, as go test prints it
	CPUFlags  map[string]bool `json:"cpu_flags"`
	VM        bool            `json:"vm"` // the hypervisor flag
	CPUs      int             `json:"cpus"`
	Kernel    string          `json:"kernel"`
	Arch      string          `json:"arch"`
	GoVersion string          `json:"go_version"`
	// The 1, 5 and 15 minute load averages when the run started and when it
	// ended. The run's own benchmark adds about 1 while it runs.
	LoadStart []float64 `json:"load_start"`
	LoadEnd   []float64 `json:"load_end"`
	// Loaded: other work ran beside the benchmarks (see loaded).
	Loaded bool `json:"loaded"`
}

// reportedFlags are the CPU flags the figures depend on.
var reportedFlags = []string{"gfni", "avx512f", "avx512bw", "avx2", "ssse3"}

func readMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Arch: runtime.GOARCH, GoVersion: runtime.Version(),
		CPUFlags: map[string]bool{}, LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel, m.CPUFlags, m.VM = parseCPUInfo(b)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		m.Kernel = strings.TrimSpace(unix.ByteSliceToString(u.Sysname[:]) + " " +
			unix.ByteSliceToString(u.Release[:]))
	}
	return m
}

// parseCPUInfo gives the first processor's model name and which of
// reportedFlags it has.
func parseCPUInfo(b []byte) (model string, flags map[string]bool, vm bool) {
	flags = map[string]bool{}
	for _, f := range reportedFlags {
		flags[f] = false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	seenFlags := false
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && model == "":
			model = v
		case k == "flags" && !seenFlags:
			seenFlags = true
			for _, f := range strings.Fields(v) {
				if _, want := flags[f]; want {
					flags[f] = true
				}
				if f == "hypervisor" {
					vm = true
				}
			}
		}
	}
	return model, flags, vm
}

// loadAvg is /proc/loadavg's three averages, or nil.
func loadAvg() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	var out []float64
	for _, s := range f[:3] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// loaded says whether other work shared the machine: at the start more than
// a quarter of its CPUs busy over the last minute, or at the end more than
// that beyond the one CPU the benchmarks themselves keep busy.
func (m *machine) loaded() bool {
	q := float64(m.CPUs) / 4
	if len(m.LoadStart) > 0 && m.LoadStart[0] > q {
		return true
	}
	return len(m.LoadEnd) > 0 && m.LoadEnd[0] > q+1
}

// lines is the machine block under the table, each under 100 columns.
func (m *machine) lines() []string {
	var fl []string
	for _, f := range reportedFlags {
		if m.CPUFlags[f] {
			fl = append(fl, f)
		} else {
			fl = append(fl, "no "+f)
		}
	}
	vm := ""
	if m.VM {
		vm = ", VM"
	}
	out := []string{
		clip(fmt.Sprintf("cpu:    %s, %d CPUs%s", m.cpuName(), m.CPUs, vm), tableWidth),
		clip("flags:  "+strings.Join(fl, ", "), tableWidth),
		clip(fmt.Sprintf("system: %s %s, %s", m.Kernel, m.Arch, m.GoVersion), tableWidth),
	}
	out = append(out, clip(fmt.Sprintf("load:   %s at the start, %s at the end (1, 5, 15 min)",
		fmtLoad(m.LoadStart), fmtLoad(m.LoadEnd)), tableWidth))
	if m.Loaded {
		out = append(out, "LOADED: other work shared the CPUs; compare ratios, not values, across runs")
	}
	return out
}

func fmtLoad(l []float64) string {
	if len(l) < 3 {
		return "?"
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f", l[0], l[1], l[2])
}

// cpuName is the CPU's model and, where CPUID names it otherwise (a VM's
// virtual model), that name too.
func (m *machine) cpuName() string {
	if m.CPUBrand == "" || m.CPUBrand == m.CPUModel {
		return m.CPUModel
	}
	if m.CPUModel == "" {
		return m.CPUBrand
	}
	return m.CPUBrand + " (" + m.CPUModel + ")"
}
