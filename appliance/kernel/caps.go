//go:build linux

package kernel

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Cap is a Linux capability (linux/capability.h).
type Cap uint

// The capabilities linerate's drivers and probes need.
const (
	CapNetAdmin Cap = 12
	CapNetRaw   Cap = 13
	CapIPCLock  Cap = 14
	CapSysAdmin Cap = 21
	CapSysNice  Cap = 23
	CapPerfmon  Cap = 38
	CapBPF      Cap = 39
)

var capNames = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

func (c Cap) String() string {
	if int(c) < len(capNames) {
		return capNames[c]
	}
	return fmt.Sprintf("CAP_%d", uint(c))
}

// Caps is a set of capabilities, a bit each, as /proc/PID/status shows them.
type Caps uint64

// Has reports whether c is in the set.
func (s Caps) Has(c Cap) bool { return c < 64 && s&(1<<c) != 0 }

// List is the set's capabilities, in number order.
func (s Caps) List() []Cap {
	var out []Cap
	for c := Cap(0); c < 64; c++ {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// BPF reports whether the set may load BPF programs and make maps as the
// kernel's bpf_capable() sees it: CAP_BPF, or CAP_SYS_ADMIN before it.
func (s Caps) BPF() bool { return s.Has(CapBPF) || s.Has(CapSysAdmin) }

// Perfmon is perfmon_capable(): CAP_PERFMON, or CAP_SYS_ADMIN.
func (s Caps) Perfmon() bool { return s.Has(CapPerfmon) || s.Has(CapSysAdmin) }

// EffectiveCaps reads the calling thread's effective capabilities (CapEff
// in /proc/thread-self/status): what the kernel checks.
func EffectiveCaps() (Caps, error) {
	f, err := os.Open("/proc/thread-self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("CapEff %q: %w", strings.TrimSpace(v), err)
			}
			return Caps(n), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/thread-self/status has no CapEff")
}

// Needs lists the capabilities f's probe needs to answer: loading an XDP
// program or making an XSKMAP needs CAP_BPF (or CAP_SYS_ADMIN) and
// CAP_NET_ADMIN; the route probes CAP_NET_ADMIN. Without them the answer is
// Unknown.
func (f Feature) Needs() []Cap {
	switch f {
	case XDPAdjustMeta, XDPAdjustHead, KtimeGetNs, KtimeGetTAINs, Loop, XSKMap, DevBound:
		return []Cap{CapBPF, CapNetAdmin}
	case Seg6Local, IOAM6Encap:
		return []Cap{CapNetAdmin}
	}
	return nil // the kernel's BTF and the IOAM6 family are anyone's to read
}
