//go:build linux

// Package kernel says what the running kernel offers linerate: the BPF
// helpers and kfuncs its XDP programs call, device-bound programs, and the
// lightweight tunnels its interop peers use (seg6local, ioam6).
//
// Every probe tries the feature itself: it loads a tiny program or asks
// netlink. None reads /boot/config-*, which may be absent or belong to
// another build. Kernel builds differ between machines of the same
// distribution (one refuses bpf_xdp_adjust_meta in XDP programs, another has
// no seg6local), so a probe's answer is the only truth. Answers are cached
// once per process.
//
// LINERATE_KERNEL_DISABLE (a comma-separated list of feature names, or
// "all") makes features read as missing: the fallbacks then run on a kernel
// that has everything, in tests and by hand.
package kernel

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Feature is one thing the kernel may or may not offer.
type Feature int

// The features linerate probes. Names are stable: logs, `linerate doctor
// --json`, LINERATE_KERNEL_DISABLE and the test suite's skip table use them.
const (
	// XDPAdjustMeta: bpf_xdp_adjust_meta in XDP programs, the metadata area
	// in front of a frame that carries the dispatcher's rx stamp.
	XDPAdjustMeta Feature = iota
	// XDPAdjustHead: bpf_xdp_adjust_head, the headroom the stamp goes in
	// where there is no metadata area.
	XDPAdjustHead
	// KtimeGetNs: bpf_ktime_get_ns (CLOCK_MONOTONIC), the kernel's rx time.
	KtimeGetNs
	// KtimeGetTAINs: bpf_ktime_get_tai_ns (CLOCK_TAI), the STAMP offloads'
	// timestamps.
	KtimeGetTAINs
	// Loop: bpf_loop, the dispatcher's rule walk.
	Loop
	// XSKMap: BPF_MAP_TYPE_XSKMAP, the redirect to AF_XDP sockets.
	XSKMap
	// RxTimestampKfunc: the kfunc bpf_xdp_metadata_rx_timestamp, the NIC's
	// rx stamp in a device-bound XDP program.
	RxTimestampKfunc
	// DevBound: device-bound XDP programs (BPF_F_XDP_DEV_BOUND_ONLY).
	DevBound
	// Seg6Local: the seg6local lightweight tunnel (SRv6 End and friends).
	Seg6Local
	// IOAM6: the kernel's IOAM namespaces and transit (the IOAM6 generic
	// netlink family, ip ioam).
	IOAM6
	// IOAM6Encap: the ioam6 lightweight tunnel (the kernel as IOAM encap
	// node).
	IOAM6Encap

	numFeatures
)

var info = [numFeatures]struct {
	name, option, what string
}{
	XDPAdjustMeta: {"bpf_xdp_adjust_meta", "Linux >= 4.15; some builds refuse it to XDP programs",
		"the rx stamp in the XDP metadata area"},
	XDPAdjustHead:    {"bpf_xdp_adjust_head", "Linux >= 4.10", "the rx stamp in the frame's headroom"},
	KtimeGetNs:       {"bpf_ktime_get_ns", "Linux >= 4.1", "the kernel's rx time"},
	KtimeGetTAINs:    {"bpf_ktime_get_tai_ns", "Linux >= 6.1", "STAMP timestamps in the kernel"},
	Loop:             {"bpf_loop", "Linux >= 5.17", "the XDP dispatcher's rule walk"},
	XSKMap:           {"BPF_MAP_TYPE_XSKMAP", "CONFIG_XDP_SOCKETS", "AF_XDP sockets"},
	RxTimestampKfunc: {"bpf_xdp_metadata_rx_timestamp", "Linux >= 6.3 with BTF (CONFIG_DEBUG_INFO_BTF)", "the NIC's rx stamp"},
	DevBound:         {"device-bound XDP programs", "Linux >= 6.3", "the NIC's rx stamp"},
	Seg6Local:        {"seg6local", "CONFIG_IPV6_SEG6_LWTUNNEL", "SRv6 End nodes in the kernel"},
	IOAM6:            {"ioam6", "CONFIG_IPV6 >= 5.15 (the IOAM6 netlink family)", "IOAM transit in the kernel"},
	IOAM6Encap:       {"ioam6 encap", "CONFIG_IPV6_IOAM6_LWTUNNEL", "IOAM encapsulation in the kernel"},
}

func (f Feature) String() string {
	if f < 0 || f >= numFeatures {
		return fmt.Sprintf("feature(%d)", int(f))
	}
	return info[f].name
}

// Option is the kernel config option or version that gives f.
func (f Feature) Option() string { return info[f].option }

// Use is what linerate needs f for.
func (f Feature) Use() string { return info[f].what }

// Features lists every feature, in a stable order.
func Features() []Feature {
	fs := make([]Feature, numFeatures)
	for i := range fs {
		fs[i] = Feature(i)
	}
	return fs
}

// Parse returns the feature named s.
func Parse(s string) (Feature, bool) {
	for _, f := range Features() {
		if f.String() == s {
			return f, true
		}
	}
	return 0, false
}

// State is a probe's answer.
type State uint8

const (
	// Unknown: the probe could not tell, most often for want of privileges
	// (loading a BPF program needs CAP_BPF, a route probe CAP_NET_ADMIN).
	Unknown State = iota
	// Present: the kernel offers it.
	Present
	// Missing: the kernel refused it.
	Missing
)

func (s State) String() string {
	return [...]string{"unknown", "yes", "no"}[s]
}

// Result is what a probe found.
type Result struct {
	Feature Feature
	State   State
	// Detail says in one line what the probe saw: the kernel's refusal, or
	// why it could not tell.
	Detail string
}

// OK reports whether the feature is there.
func (r Result) OK() bool { return r.State == Present }

// Err is nil when the feature is there, else an error that names it, the
// kernel option that gives it and what the probe saw.
func (r Result) Err() error {
	switch r.State {
	case Present:
		return nil
	case Missing:
		return &MissingError{Feature: r.Feature, Detail: r.Detail}
	}
	return fmt.Errorf("could not tell whether the kernel offers %s: %s", r.Feature, r.Detail)
}

// MissingError says the kernel lacks a feature.
type MissingError struct {
	Feature Feature
	Detail  string
}

func (e *MissingError) Error() string {
	s := fmt.Sprintf("the kernel lacks %s (%s)", e.Feature, e.Feature.Option())
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// IsMissing reports whether err says a kernel feature is missing, and which.
func IsMissing(err error) (Feature, bool) {
	var m *MissingError
	if errors.As(err, &m) {
		return m.Feature, true
	}
	return 0, false
}

// DisableEnv names the environment variable that makes features read as
// missing.
const DisableEnv = "LINERATE_KERNEL_DISABLE"

var (
	mu      sync.Mutex
	cache   [numFeatures]*Result
	probers = [numFeatures]func() Result{
		XDPAdjustMeta:    func() Result { return probeXDPHelper(XDPAdjustMeta) },
		XDPAdjustHead:    func() Result { return probeXDPHelper(XDPAdjustHead) },
		KtimeGetNs:       func() Result { return probeXDPHelper(KtimeGetNs) },
		KtimeGetTAINs:    func() Result { return probeXDPHelper(KtimeGetTAINs) },
		Loop:             func() Result { return probeXDPHelper(Loop) },
		XSKMap:           probeXSKMap,
		RxTimestampKfunc: probeRxTimestampKfunc,
		DevBound:         probeDevBound,
		Seg6Local:        func() Result { return probeLWT(Seg6Local) },
		IOAM6:            probeIOAM6,
		IOAM6Encap:       func() Result { return probeLWT(IOAM6Encap) },
	}
)

// Probe answers for f, probing it the first time it is asked.
func Probe(f Feature) Result {
	if f < 0 || f >= numFeatures {
		return Result{Feature: f, State: Unknown, Detail: "no such feature"}
	}
	if disabled(f) {
		return Result{Feature: f, State: Missing, Detail: DisableEnv + " turns it off"}
	}
	mu.Lock()
	defer mu.Unlock()
	if cache[f] == nil {
		r := probers[f]()
		r.Feature = f
		cache[f] = &r
	}
	return *cache[f]
}

// Has reports whether the kernel offers f.
func Has(f Feature) bool { return Probe(f).OK() }

// Require is nil when the kernel offers every one of fs, else the first
// one's error.
func Require(fs ...Feature) error {
	for _, f := range fs {
		if err := Probe(f).Err(); err != nil {
			return err
		}
	}
	return nil
}

// All probes every feature.
func All() []Result {
	out := make([]Result, 0, numFeatures)
	for _, f := range Features() {
		out = append(out, Probe(f))
	}
	return out
}

func disabled(f Feature) bool {
	v := os.Getenv(DisableEnv)
	if v == "" {
		return false
	}
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "all" || s == f.String() {
			return true
		}
	}
	return false
}
