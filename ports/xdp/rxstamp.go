//go:build linux

package xdp

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/ports"
)

// Rx timestamp modes: the rx_timestamp key.
const (
	TimestampAuto     = "auto"     // the best that works here, named in one log line
	TimestampHardware = "hardware" // the NIC's, read by a device-bound dispatcher; an error without
	TimestampKernel   = "kernel"   // bpf_ktime_get_ns in the dispatcher; an error without
	TimestampEngine   = "engine"   // the lcore's clock when it takes the burst
)

// lrMeta is lr_offload.h's struct lr_xdp_meta: the stamp, 16 bytes right in
// front of the frame's data in either variant (the metadata area, or the
// headroom the port strips), so one reader serves both.
type lrMeta struct {
	rxNs   uint64
	source uint32
	magic  uint32
}

const (
	lrMetaSize  = 16
	lrMetaMagic = 0x6c724d31
	lrRxKtime   = 1
	lrRxHW      = 2
)

// rxPlan is where a port's rx timestamps come from: chosen from the
// kernel's probes before anything loads, not by trying.
type rxPlan struct {
	source string   // Info.TimestampSource: hardware, kernel or engine
	via    stampVia // how the dispatcher hands its stamp up
	dev    bool     // a device-bound dispatcher, for the NIC's stamps
	// kernelLacks: what of the kernel's auto went without (a fallback);
	// notes: what else decided it (no PHC on the interface, the mode asked).
	kernelLacks, notes []string
}

// why is what decided the plan, for its log line and Info.
func (r rxPlan) why() string {
	return strings.Join(append(append([]string(nil), r.kernelLacks...), r.notes...), "; ")
}

// how says where the stamp is taken and how it reaches the port.
func (r rxPlan) how() string {
	carried := map[stampVia]string{viaMeta: "carried in the metadata area", viaHead: "carried in the headroom"}[r.via]
	switch r.source {
	case TimestampHardware:
		return "the NIC's, read by the device-bound XDP dispatcher (bpf_xdp_metadata_rx_timestamp), " + carried
	case TimestampKernel:
		return "bpf_ktime_get_ns in the XDP dispatcher, " + carried
	}
	return "the lcore's clock when it takes the burst"
}

// line is the plan's one log line.
func (r rxPlan) line() string {
	s := "rx timestamps: " + r.source + " (" + r.how()
	if w := r.why(); w != "" {
		s += "; " + w
	}
	return s + ")"
}

// finding is the plan as linerate doctor -c shows it.
func (r rxPlan) finding(name string) ports.Finding {
	f := ports.Finding{Subject: fmt.Sprintf("port %q", name), Need: "rx timestamps", Outcome: ports.AsAsked}
	where := map[stampVia]string{viaMeta: "in the XDP metadata area", viaHead: "in the frame's headroom"}[r.via]
	switch r.source {
	case TimestampHardware:
		f.Detail = "hardware, the NIC's, " + where
	case TimestampKernel:
		f.Detail = "kernel, " + where
	default:
		f.Detail = "engine, the lcore's clock"
	}
	if len(r.kernelLacks) > 0 {
		f.Outcome = ports.FallsBack
	}
	if w := r.why(); w != "" {
		f.Detail += ": " + w
	}
	return f
}

// lacks says that the kernel lacks f, or that LINERATE_KERNEL_DISABLE
// turns it off.
func lacks(f kernel.Feature) string {
	if disabledByEnv(f) {
		return kernel.DisableEnv + " turns off " + f.String()
	}
	if r := kernel.Probe(f); r.State == kernel.Unknown {
		// doctor without root: the probe could not run, which is not "no".
		return "could not probe " + f.String() + " (" + r.Detail + ")"
	}
	return "this kernel lacks " + f.String()
}

func disabledByEnv(f kernel.Feature) bool {
	for _, s := range strings.Split(os.Getenv(kernel.DisableEnv), ",") {
		if s = strings.TrimSpace(s); s == "all" || s == f.String() {
			return true
		}
	}
	return false
}

// devBoundOn reports whether ifindex takes a device-bound XDP program, or
// why not. kernel.DevBound says only whether the kernel knows the flag: the
// interface's own answer decides, unless LINERATE_KERNEL_DISABLE turns the
// feature off.
func devBoundOn(ifindex int) error {
	if disabledByEnv(kernel.DevBound) {
		return kernel.Probe(kernel.DevBound).Err()
	}
	return kernel.DevBoundOn(ifindex).Err()
}

// carrier is the best way to hand a stamp up on this kernel: the metadata
// area, else the headroom; viaNone with the reasons when neither, and an
// error naming what is missing.
func carrier() (stampVia, []string, error) {
	if r := kernel.Probe(kernel.KtimeGetNs); !r.OK() {
		return viaNone, []string{lacks(kernel.KtimeGetNs)}, fmt.Errorf("needs bpf_ktime_get_ns in XDP programs: %w", r.Err())
	}
	if kernel.Has(kernel.XDPAdjustMeta) {
		return viaMeta, nil, nil
	}
	why := []string{lacks(kernel.XDPAdjustMeta)}
	r := kernel.Probe(kernel.XDPAdjustHead)
	if r.OK() {
		return viaHead, why, nil
	}
	return viaNone, append(why, lacks(kernel.XDPAdjustHead)),
		fmt.Errorf("needs bpf_xdp_adjust_meta or bpf_xdp_adjust_head in XDP programs: %w", r.Err())
}

// iface is what the rx timestamp choice reads of the interface.
type iface struct {
	name  string
	index int
	phc   bool        // a PTP hardware clock (ethtool -T)
	feat  xdpFeatures // what the driver says it offers XDP
}

// ifaceOf reads ifname's; the caller's thread is in its network namespace.
func ifaceOf(ifname string, ifindex int) iface {
	return iface{name: ifname, index: ifindex, phc: phcOf(ifname), feat: devXDPFeatures(ifindex)}
}

// planRx chooses the port's rx timestamps for mode: hardware (a PHC on the
// interface, a driver that hands XDP its stamps, the kfunc, a device-bound
// program), else the kernel's clock in the metadata area, else in the
// headroom, else the engine's. An explicit mode this host cannot give is an
// error naming what is missing. forced (tests) picks the carrier instead
// of the probes.
func planRx(mode string, ifc iface, host bool, forced *stampVia) (rxPlan, error) {
	ifname := ifc.name
	engine := rxPlan{source: TimestampEngine, via: viaNone}
	if mode == TimestampEngine {
		engine.notes = []string{`rx_timestamp = "engine"`}
		return engine, nil
	}
	if !host {
		if mode != TimestampAuto {
			return rxPlan{}, fmt.Errorf("rx_timestamp = %q needs the host clock (the engine runs in virtual time)", mode)
		}
		engine.notes = []string{"the engine runs in virtual time"}
		return engine, nil
	}
	via, viaWhy, viaErr := carrier()
	if forced != nil {
		via, viaWhy, viaErr = *forced, nil, nil
		if via == viaNone {
			viaErr = errors.New("forced to no stamp")
		}
	}
	var plan rxPlan
	if mode == TimestampAuto || mode == TimestampHardware {
		var hwWhy, hwNote string
		var hwErr error
		switch {
		case !ifc.phc:
			hwNote = ifname + " has no PTP hardware clock"
			hwErr = fmt.Errorf("%s has no PTP hardware clock (ethtool -T %s)", ifname, ifname)
		case ifc.feat.known && !ifc.feat.rxTimestamp:
			hwNote = ifname + "'s driver gives XDP no rx timestamp"
			hwErr = fmt.Errorf("%s's driver gives XDP programs no rx timestamp (xdp-rx-metadata-features)", ifname)
		case !kernel.Has(kernel.RxTimestampKfunc):
			hwWhy, hwErr = lacks(kernel.RxTimestampKfunc), kernel.Probe(kernel.RxTimestampKfunc).Err()
		default:
			if err := devBoundOn(ifc.index); err != nil {
				hwWhy, hwErr = ifname+" takes no device-bound XDP program", err
			}
		}
		if hwErr == nil && viaErr == nil {
			return rxPlan{source: TimestampHardware, via: via, dev: true, kernelLacks: viaWhy}, nil
		}
		if mode == TimestampHardware {
			if hwErr == nil {
				hwErr = viaErr
			}
			return rxPlan{}, fmt.Errorf(`rx_timestamp = "hardware": %w`, hwErr)
		}
		if hwWhy != "" {
			plan.kernelLacks = append(plan.kernelLacks, hwWhy)
		}
		if hwNote != "" {
			plan.notes = append(plan.notes, hwNote)
		}
	}
	if viaErr != nil {
		if mode == TimestampKernel {
			return rxPlan{}, fmt.Errorf(`rx_timestamp = "kernel" %w`, viaErr)
		}
		engine.kernelLacks = append(plan.kernelLacks, viaWhy...)
		engine.notes = plan.notes
		return engine, nil
	}
	plan.source, plan.via = TimestampKernel, via
	plan.kernelLacks = append(plan.kernelLacks, viaWhy...)
	if mode == TimestampKernel {
		plan.notes = nil // asked for: no PHC is no reason
	}
	return plan, nil
}

// phcOf reports whether ifname has a PTP hardware clock (ethtool -T),
// without opening it.
func phcOf(ifname string) bool {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(s)
	info, err := unix.IoctlGetEthtoolTsInfo(s, ifname)
	return err == nil && info.Phc_index >= 0
}
