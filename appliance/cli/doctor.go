package cli

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/ports"
)

const doctorUsage = `Usage: linerate doctor [-c FILE] [--wide | --json]

Says what this host offers linerate, as bpftool feature probe, dpdk-devbind.py
--status and xdp-loader features each say a part of it: the kernel and the BPF
and XDP features linerate uses; each interface's driver, XDP mode, zero-copy
AF_XDP, device-bound programs, PTP hardware clock and rx stamping; what DPDK
needs (hugepages, IOMMU, vfio-pci); this process's capabilities and locked
memory against what each port driver needs; the clock's sync state. It changes
nothing. Without root some answers are "unknown", each saying what it needs.

With -c FILE it also says, for that config, what will run here as asked, what
will fall back and what will fail, and why; then it exits 1 if anything fails.

Flags:
`

// The capabilities linerate's drivers use, in the order doctor lists them.
var doctorCaps = []kernel.Cap{kernel.CapNetAdmin, kernel.CapNetRaw, kernel.CapBPF, kernel.CapPerfmon,
	kernel.CapIPCLock, kernel.CapSysAdmin, kernel.CapSysNice}

// answer is a yes/no/unknown with why.
type answer struct {
	State  string `json:"state"` // yes, no, unknown
	Detail string `json:"detail,omitempty"`
}

type doctorFeature struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Option string `json:"option"`
	Use    string `json:"use"`
	Detail string `json:"detail,omitempty"`
}

type doctorIface struct {
	Name     string `json:"name"`
	Index    int    `json:"index"`
	Driver   string `json:"driver,omitempty"`
	Bus      string `json:"bus,omitempty"`
	Link     string `json:"link"` // up, down
	MTU      int    `json:"mtu"`
	RxQueues int    `json:"rx_queues"` // -1: unknown
	TxQueues int    `json:"tx_queues"`
	// XDP is the mode an XDP program gets: native where the driver has it
	// (xdp-features basic), else generic; unknown where the kernel does not
	// say (Linux < 6.3).
	XDP           string   `json:"xdp"`
	XDPFeatures   []string `json:"xdp_features"`
	XDPRxMetadata []string `json:"xdp_rx_metadata"`
	ZeroCopy      answer   `json:"zero_copy"`
	DevBound      answer   `json:"dev_bound"`
	// PHC is the PTP hardware clock's device, "" for none.
	PHC string `json:"phc,omitempty"`
	// HWRxStamps: the NIC stamps every received frame with its PHC.
	HWRxStamps answer   `json:"hw_rx_stamps"`
	Notes      []string `json:"notes,omitempty"`
}

type doctorDriverNeed struct {
	Driver  string   `json:"driver"`
	Needs   string   `json:"needs"`
	Missing []string `json:"missing"`
	Detail  string   `json:"detail,omitempty"`
}

type doctorProcess struct {
	UID  int    `json:"uid"`
	User string `json:"user"`
	// Caps are the capabilities linerate uses that the process holds;
	// Lacks those it does not. Both nil when CapEff could not be read.
	Caps    []string `json:"caps"`
	Lacks   []string `json:"lacks"`
	CapsErr string   `json:"caps_error,omitempty"`
	// Memlock is RLIMIT_MEMLOCK in bytes, -1 for unlimited.
	Memlock int64              `json:"memlock"`
	Drivers []doctorDriverNeed `json:"drivers"`
}

type doctorClock struct {
	Synchronized bool     `json:"synchronized"`
	MaxErrorNs   int64    `json:"max_error_ns"`
	EstErrorNs   int64    `json:"est_error_ns"`
	TAIOffset    int      `json:"tai_offset"`
	Source       string   `json:"clocksource"`
	Available    []string `json:"available_clocksources"`
}

type doctorFinding struct {
	Subject string `json:"subject"`
	Need    string `json:"need"`
	Outcome string `json:"outcome"` // ok, fallback, fail, warning
	Detail  string `json:"detail"`
}

type doctorConfig struct {
	Path     string          `json:"path"`
	Findings []doctorFinding `json:"findings"`
	// Error is the config's own error, when it does not build.
	Error string `json:"error,omitempty"`
}

type doctorReport struct {
	Kernel struct {
		Release string `json:"release"`
		Version string `json:"version"`
		Machine string `json:"machine"`
	} `json:"kernel"`
	Drivers    []string        `json:"drivers"`
	Features   []doctorFeature `json:"features"`
	Interfaces []doctorIface   `json:"interfaces"`
	DPDK       doctorDPDK      `json:"dpdk"`
	Process    doctorProcess   `json:"process"`
	Clock      doctorClock     `json:"clock"`
	Config     *doctorConfig   `json:"config,omitempty"`

	caps   kernel.Caps
	capsOK bool
}

func cmdDoctor(args []string) int { return runDoctor(args, os.Stdout, os.Stderr) }

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("c", "", "also say what this config `file` gets of this host")
	asJSON := fs.Bool("json", false, "print one JSON object (kernel, features, interfaces, dpdk, process, clock, config)")
	wide := fs.Bool("wide", false, "print each table row on one line, however wide")
	fs.Usage = func() { printDoctorUsage(stderr, fs) }
	if wantsHelp(args) {
		printDoctorUsage(stdout, fs)
		return 0
	}
	if code, ok := parseOnly(fs, args, " (a config file is -c FILE)"); !ok {
		return code
	}
	r := doctor()
	if *cfgPath != "" {
		r.Config = doctorCheckConfig(*cfgPath)
	}
	if *asJSON {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "linerate doctor: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		var b strings.Builder
		r.write(&b, table.Options{Wide: *wide})
		if _, err := io.WriteString(stdout, b.String()); err != nil {
			return 1
		}
	}
	if r.Config != nil && r.Config.fails() {
		return 1
	}
	return 0
}

func printDoctorUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, doctorUsage)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + name
		}
		dash := "--" // and -c with one, as run and validate show it
		if len(f.Name) == 1 {
			dash = "-"
		}
		fmt.Fprintf(w, "  %s%s%s\n    \t%s\n", dash, f.Name, name, usage)
	})
}

// doctor looks at the host.
func doctor() *doctorReport {
	r := &doctorReport{}
	r.Kernel.Release, r.Kernel.Version, r.Kernel.Machine = uname()
	r.Drivers = ports.Drivers()
	r.capsErr(kernel.EffectiveCaps())
	for _, res := range kernel.All() {
		f := res.Feature
		r.Features = append(r.Features, doctorFeature{Name: f.String(), State: res.State.String(), Option: f.Option(),
			Use: f.Use(), Detail: r.unknownWhy(res, f.Needs())})
	}
	r.Interfaces = r.interfaces()
	r.DPDK = readDPDKHost("/")
	r.DPDK.Driver = slices.Contains(r.Drivers, "dpdk")
	if !r.DPDK.Driver {
		r.DPDK.Build, _ = ports.Absent("dpdk")
	}
	r.Process = r.process()
	s := clock.HostSync()
	r.Clock = doctorClock{Synchronized: s.Synchronized, MaxErrorNs: s.MaxErrorNs, EstErrorNs: s.ErrorNs, TAIOffset: s.TAIOffset}
	r.Clock.Source, r.Clock.Available = clocksource()
	return r
}

// capsErr records CapEff, or why it could not be read.
func (r *doctorReport) capsErr(c kernel.Caps, err error) {
	r.caps, r.capsOK = c, err == nil
	if err != nil {
		r.Process.CapsErr = err.Error()
	}
}

// unknownWhy is a probe's detail; for an answer that is unknown for want
// of privileges, what it needs, by the capabilities this process lacks.
func (r *doctorReport) unknownWhy(res kernel.Result, needs []kernel.Cap) string {
	if res.State != kernel.Unknown {
		return res.Detail
	}
	var lacks []string
	for _, c := range needs {
		if !r.capsOK || !r.has(c) {
			lacks = append(lacks, c.String())
		}
	}
	if len(lacks) > 0 && (strings.Contains(res.Detail, "privileges") || res.Detail == "") {
		return "needs root (" + strings.Join(lacks, ", ") + ")"
	}
	return res.Detail
}

// has reports whether the process holds c, with CAP_SYS_ADMIN standing in
// for CAP_BPF and CAP_PERFMON as the kernel lets it.
func (r *doctorReport) has(c kernel.Cap) bool {
	switch c {
	case kernel.CapBPF:
		return r.caps.BPF()
	case kernel.CapPerfmon:
		return r.caps.Perfmon()
	}
	return r.caps.Has(c)
}

// interfaces answers for every interface of this network namespace, lo
// included: it is where the lab's afpacket and xdp tests run.
func (r *doctorReport) interfaces() []doctorIface {
	ifs, err := net.Interfaces()
	if err != nil {
		return []doctorIface{}
	}
	out := make([]doctorIface, 0, len(ifs))
	for _, ifc := range ifs {
		d := doctorIface{Name: ifc.Name, Index: ifc.Index, MTU: ifc.MTU, Link: "down", RxQueues: -1, TxQueues: -1,
			XDPFeatures: []string{}, XDPRxMetadata: []string{}}
		if ifc.Flags&net.FlagRunning != 0 {
			d.Link = "up"
		}
		note := func(format string, a ...any) { d.Notes = append(d.Notes, fmt.Sprintf(format, a...)) }
		if di, err := kernel.Driver(ifc.Name); err == nil {
			d.Driver, d.Bus = di.Driver, di.Bus
		} else if ifc.Flags&net.FlagLoopback != 0 {
			note("loopback: no driver, and XDP in generic mode only")
		} else {
			note("no driver named (%v)", err)
		}
		if rx, tx, err := kernel.Queues(ifc.Name); err == nil {
			d.RxQueues, d.TxQueues = rx, tx
		} else {
			note("queues unknown: %v", err)
		}
		x, err := kernel.XDPFeatures(ifc.Index)
		switch {
		case err != nil:
			d.XDP = "unknown"
			d.ZeroCopy = answer{"unknown", err.Error()}
			note("XDP: %v; the xdp port tries native mode, then generic", err)
		default:
			d.XDPFeatures, d.XDPRxMetadata = x.Act.Names(), x.RxMeta.Names()
			if d.XDPFeatures == nil {
				d.XDPFeatures = []string{}
			}
			if d.XDPRxMetadata == nil {
				d.XDPRxMetadata = []string{}
			}
			d.XDP = "generic"
			if x.Act&kernel.XDPBasic != 0 {
				d.XDP = "native"
			}
			d.ZeroCopy = answer{State: "no"}
			if x.Act&kernel.XDPZeroCopy != 0 {
				d.ZeroCopy.State = "yes"
			}
			if len(d.XDPFeatures) > 0 {
				note("xdp-features %s", strings.Join(d.XDPFeatures, " "))
			} else if ifc.Flags&net.FlagLoopback == 0 {
				note("no native XDP: generic mode only, which copies every frame")
			}
			if len(d.XDPRxMetadata) > 0 {
				note("xdp-rx-metadata %s", strings.Join(d.XDPRxMetadata, " "))
			}
		}
		db := kernel.DevBoundOn(ifc.Index)
		d.DevBound = answer{db.State.String(), r.unknownWhy(db, kernel.DevBound.Needs())}
		if db.State == kernel.Missing && d.XDP == "generic" {
			d.DevBound.Detail = "no native XDP"
		}
		if st, err := kernel.ReadStamping(ifc.Name); err != nil {
			d.HWRxStamps = answer{"unknown", err.Error()}
		} else {
			if st.PHC >= 0 {
				d.PHC = fmt.Sprintf("/dev/ptp%d", st.PHC)
			}
			d.HWRxStamps = answer{State: "yes"}
			if err := st.RxAll(); err != nil {
				d.HWRxStamps = answer{"no", err.Error()}
			}
		}
		for _, a := range []struct {
			what string
			a    answer
		}{{"device-bound programs", d.DevBound}, {"hardware rx stamps", d.HWRxStamps}} {
			if a.a.State != "yes" && a.a.Detail != "" && a.a.Detail != "no native XDP" {
				note("%s: %s", a.what, a.a.Detail)
			}
		}
		out = append(out, d)
	}
	return out
}

// process is this process's capabilities and locked-memory limit, and what
// each port driver needs of them and of the host (docs/operations.md,
// "Capabilities"; packaging/linerate.service).
func (r *doctorReport) process() doctorProcess {
	p := doctorProcess{UID: os.Geteuid(), Caps: []string{}, Lacks: []string{}, Drivers: []doctorDriverNeed{}}
	p.User = strconv.Itoa(p.UID)
	if u, err := user.LookupId(p.User); err == nil {
		p.User = u.Username
	}
	p.CapsErr = r.Process.CapsErr
	for _, c := range doctorCaps {
		if r.capsOK && r.caps.Has(c) {
			p.Caps = append(p.Caps, c.String())
		} else {
			p.Lacks = append(p.Lacks, c.String())
		}
	}
	var err error
	if p.Memlock, err = memlock(); err != nil {
		p.Memlock = 0
	}
	lacks := func(cs ...kernel.Cap) []string {
		out := []string{}
		for _, c := range cs {
			if !r.capsOK || !r.has(c) {
				out = append(out, c.String())
			}
		}
		return out
	}
	have := map[string]bool{}
	for _, d := range r.Drivers {
		have[d] = true
	}
	// The drivers this binary has, and dpdk always: where to get it is news.
	add := func(driver, needs string, missing []string, detail string) {
		if have[driver] || driver == "dpdk" {
			p.Drivers = append(p.Drivers, doctorDriverNeed{Driver: driver, Needs: needs, Missing: missing, Detail: detail})
		}
	}
	add("afpacket", "CAP_NET_RAW, CAP_NET_ADMIN", lacks(kernel.CapNetRaw, kernel.CapNetAdmin),
		"a packet socket; the interface's MTU and promiscuous mode")
	add("tap", "CAP_NET_ADMIN", lacks(kernel.CapNetAdmin), "creating the TAP device")
	xdp := lacks(kernel.CapNetAdmin, kernel.CapBPF, kernel.CapPerfmon, kernel.CapNetRaw)
	umem := uint64(4 * 2048 * 4096) // a queue's UMEM with the default ring_size and frame_size
	if p.Memlock >= 0 && uint64(p.Memlock) < umem && !(r.capsOK && r.caps.Has(kernel.CapIPCLock)) {
		xdp = append(xdp, bytesIEC(umem)+" memlock")
	}
	add("xdp", "CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON, CAP_NET_RAW; locked memory for the UMEM ("+bytesIEC(umem)+
		" a queue by default), or CAP_IPC_LOCK", xdp, "loading and attaching the XDP program; the AF_XDP socket")
	dpdk := lacks(kernel.CapIPCLock)
	if !r.DPDK.Driver {
		dpdk = append(dpdk, "the dpdk build")
	}
	if hugeTotal(r.DPDK.Hugepages) == 0 {
		dpdk = append(dpdk, "hugepages")
	}
	if !r.DPDK.Modules["vfio-pci"] {
		dpdk = append(dpdk, "vfio-pci")
	}
	add("dpdk", "CAP_IPC_LOCK (and CAP_SYS_ADMIN with vfio's no-IOMMU mode); hugepages, or huge = false for "+
		"vdevs alone; vfio-pci for a PCI NIC", dpdk, "locked DMA memory; physical addresses")
	add("memif", "nothing beyond the socket file's directory", []string{}, "a unix socket")
	var plain []string
	for _, d := range []string{"null", "mem", "pcap"} {
		if have[d] {
			plain = append(plain, d)
		}
	}
	if len(plain) > 0 {
		p.Drivers = append(p.Drivers, doctorDriverNeed{Driver: strings.Join(plain, ", "), Needs: "nothing",
			Missing: []string{}, Detail: "no device of their own"})
	}
	return p
}

func hugeTotal(hs []doctorHugepages) int {
	n := 0
	for _, h := range hs {
		n += h.Total
	}
	return n
}

// doctorCheckConfig runs path as `linerate validate` does, hearing what
// each port and stage gets of this host.
func doctorCheckConfig(path string) *doctorConfig {
	c := &doctorConfig{Path: path, Findings: []doctorFinding{}}
	cfg, err := config.Load(path)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	quiet := slog.New(slog.DiscardHandler)
	var fs []ports.Finding
	eng, err := appliance.New(cfg, appliance.Options{Log: quiet, DryRun: true,
		Plan: func(f ports.Finding) { fs = append(fs, f) }})
	for _, f := range fs {
		c.Findings = append(c.Findings, doctorFinding{f.Subject, f.Need, string(f.Outcome), f.Detail})
	}
	if err != nil {
		c.Error = err.Error()
		return c
	}
	for _, w := range eng.Warnings() {
		subject, detail := "config", w
		if s, d, ok := strings.Cut(w, ": "); ok && (strings.HasPrefix(s, "port ") || strings.HasPrefix(s, "stage ")) {
			subject, detail = s, d
		}
		c.Findings = append(c.Findings, doctorFinding{subject, "-", "warning", detail})
	}
	_ = eng.Close()
	return c
}

// fails reports whether the config cannot run here.
func (c *doctorConfig) fails() bool {
	if c.Error != "" {
		return true
	}
	for _, f := range c.Findings {
		if f.Outcome == string(ports.Fails) {
			return true
		}
	}
	return false
}

// write prints the report: a table per section, each headed by its name.
func (r *doctorReport) write(w io.Writer, o table.Options) {
	kv := func(title string) *table.Table { return table.New(table.Column{Name: title}, table.Column{Wrap: true}) }
	host := kv("HOST")
	host.Add("kernel", strings.TrimSpace(r.Kernel.Release+" "+r.Kernel.Machine))
	host.Add("linerate", versionString()+", drivers "+strings.Join(r.Drivers, ", "))
	who := fmt.Sprintf("%s (uid %d)", r.Process.User, r.Process.UID)
	if !r.capsOK || len(r.Process.Lacks) > 0 {
		who += "; some answers are unknown without CAP_BPF and CAP_NET_ADMIN (run as root to see them)"
	}
	if r.capsOK && r.caps.BPF() && r.caps.Has(kernel.CapNetAdmin) {
		who += "; every probe can run"
	}
	host.Add("user", who)
	host.Write(w, o)

	cols := []table.Column{{Name: "KERNEL FEATURE"}, {Name: "STATE"}, {Name: "FOR"},
		{Name: "DETAIL", Wrap: true, Detail: true}}
	t := table.New(cols...)
	for _, f := range r.Features {
		detail := f.Detail
		if f.State == kernel.Missing.String() {
			detail = strings.TrimSuffix(f.Option+"; "+detail, "; ")
		}
		t.Add(f.Name, f.State, f.Use, cmp.Or(detail, "-"))
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	cols = table.Cols("INTERFACE", "DRIVER", "LINK", "MTU", "RXQ", "TXQ", "XDP", "ZEROCOPY", "DEVBOUND", "PHC",
		"HWSTAMP", "NOTES")
	cols[3].Right, cols[4].Right, cols[5].Right = true, true, true
	cols[11].Wrap, cols[11].Detail = true, true
	t = table.New(cols...)
	for _, i := range r.Interfaces {
		q := func(n int) string {
			if n < 0 {
				return "?"
			}
			return strconv.Itoa(n)
		}
		t.Add(i.Name, cmp.Or(i.Driver, "-"), i.Link, strconv.Itoa(i.MTU), q(i.RxQueues), q(i.TxQueues), i.XDP,
			i.ZeroCopy.State, i.DevBound.State, cmp.Or(strings.TrimPrefix(i.PHC, "/dev/"), "none"), i.HWRxStamps.State,
			cmp.Or(strings.Join(i.Notes, "; "), "-"))
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	fmt.Fprintln(w)
	r.writeDPDK(w, o)

	p := kv("PROCESS")
	caps := "held: " + cmp.Or(strings.Join(r.Process.Caps, " "), "none")
	if len(r.Process.Lacks) > 0 {
		caps += "; lacks: " + strings.Join(r.Process.Lacks, " ")
	}
	if r.Process.CapsErr != "" {
		caps = "unknown: " + r.Process.CapsErr
	}
	p.Add("capabilities", caps)
	ml := "unlimited"
	if r.Process.Memlock >= 0 {
		ml = bytesIEC(uint64(r.Process.Memlock))
	}
	p.Add("memlock", ml+" (RLIMIT_MEMLOCK; linerate.service sets LimitMEMLOCK=infinity)")
	fmt.Fprintln(w)
	p.Write(w, o)
	// The verdict first, unwrapped: the needs wrap beside it.
	t = table.New(table.Column{Name: "DRIVER"}, table.Column{Name: "HERE"}, table.Column{Name: "NEEDS", Wrap: true})
	for _, d := range r.Process.Drivers {
		here := "ok"
		if len(d.Missing) > 0 {
			// Short names: the verdict stays on one line.
			short := make([]string, len(d.Missing))
			for i, m := range d.Missing {
				short[i] = strings.TrimPrefix(m, "CAP_")
			}
			here = "lacks " + strings.Join(short, ", ")
		}
		t.Add(d.Driver, here, d.Needs)
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	c := kv("CLOCK")
	sync := "no: the kernel's STA_UNSYNC is set, so STAMP and IOAM mark one-way delays unsynchronised"
	if r.Clock.Synchronized {
		sync = "yes (adjtimex: STA_UNSYNC clear)"
	}
	c.Add("synchronised", sync)
	c.Add("max error", time.Duration(r.Clock.MaxErrorNs).String())
	c.Add("est. error", time.Duration(r.Clock.EstErrorNs).String())
	c.Add("TAI offset", fmt.Sprintf("%d s", r.Clock.TAIOffset))
	src := cmp.Or(r.Clock.Source, "unknown")
	if len(r.Clock.Available) > 0 {
		src += " (available: " + strings.Join(r.Clock.Available, " ") + ")"
	}
	c.Add("clocksource", src)
	fmt.Fprintln(w)
	c.Write(w, o)

	if r.Config != nil {
		fmt.Fprintln(w)
		r.Config.write(w, o)
	}
}

func (r *doctorReport) writeDPDK(w io.Writer, o table.Options) {
	d := r.DPDK
	t := table.New(table.Column{Name: "DPDK"}, table.Column{Wrap: true})
	drv := "in this binary"
	if !d.Driver {
		drv = "not in this binary: " + cmp.Or(d.Build, "no build of it is known")
	}
	t.Add("driver", drv)
	inst := "none found (librte_eal.so.*)"
	if d.Library != "" {
		inst = d.Version + " (" + d.Library + ")"
	}
	t.Add("installed", inst)
	var hp []string
	for _, h := range d.Hugepages {
		hp = append(hp, fmt.Sprintf("%s: %d, %d free", bytesIEC(h.SizeKB<<10), h.Total, h.Free))
	}
	huge := cmp.Or(strings.Join(hp, "; "), "none")
	if hugeTotal(d.Hugepages) == 0 {
		huge = "none reserved (" + huge + ")"
	}
	if len(d.Hugetlbfs) > 0 {
		huge += "; hugetlbfs at " + strings.Join(d.Hugetlbfs, ", ")
	} else {
		huge += "; hugetlbfs not mounted"
	}
	t.Add("hugepages", huge)
	iommu := fmt.Sprintf("%d groups", d.IOMMUGroups)
	if d.IOMMUGroups == 0 {
		iommu = "off (no IOMMU groups): vfio-pci needs intel_iommu=on or amd_iommu=on, or its no-IOMMU mode"
	}
	if d.NoIOMMU {
		iommu += "; vfio's no-IOMMU mode is on"
	}
	t.Add("iommu", iommu)
	var mods []string
	for _, m := range dpdkUserspace {
		state := "not loaded"
		if d.Modules[m] {
			state = "loaded"
		}
		mods = append(mods, m+" "+state)
	}
	t.Add("modules", strings.Join(mods, ", "))
	var bound []string
	for _, b := range d.Bound {
		bound = append(bound, b.Address+" ("+b.Driver+")")
	}
	t.Add("bound", cmp.Or(strings.Join(bound, ", "), "no PCI device is bound to "+strings.Join(dpdkUserspace, ", ")))
	var nics []string
	for _, n := range d.NetworkDevices {
		s := n.Address + " " + cmp.Or(n.Driver, "no driver")
		if n.Iface != "" {
			s += " " + n.Iface
		}
		nics = append(nics, s)
	}
	t.Add("pci nics", cmp.Or(strings.Join(nics, ", "), "none"))
	t.Write(w, o)
}

func (c *doctorConfig) write(w io.Writer, o table.Options) {
	count := map[string]int{}
	for _, f := range c.Findings {
		count[f.Outcome]++
	}
	sum := fmt.Sprintf("%d as asked, %d fall back, %d fail", count["ok"], count["fallback"], count["fail"])
	if n := count["warning"]; n > 0 {
		sum += fmt.Sprintf(", %d warnings", n)
	}
	if c.Error != "" {
		sum += "; it does not build here: " + c.Error
	}
	head := table.New(table.Column{Name: "CONFIG"}, table.Column{Wrap: true})
	head.Add("file", c.Path)
	head.Add("here", sum)
	head.Write(w, o)
	if len(c.Findings) == 0 {
		return
	}
	cols := []table.Column{{Name: "SUBJECT"}, {Name: "NEED"}, {Name: "OUTCOME"},
		{Name: "DETAIL", Wrap: true}}
	t := table.New(cols...)
	for _, f := range c.Findings {
		t.Add(f.Subject, f.Need, f.Outcome, f.Detail)
	}
	fmt.Fprintln(w)
	t.Write(w, o)
}
