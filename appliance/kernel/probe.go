//go:build linux

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

var helpers = map[Feature]asm.BuiltinFunc{
	XDPAdjustMeta: asm.FnXdpAdjustMeta,
	XDPAdjustHead: asm.FnXdpAdjustHead,
	KtimeGetNs:    asm.FnKtimeGetNs,
	KtimeGetTAINs: asm.FnKtimeGetTaiNs,
	Loop:          asm.FnLoop,
}

// probeXDPHelper loads an XDP program that calls the helper: cilium/ebpf's
// probe, which reads the verifier's refusal ("program of this type cannot
// use helper", "invalid func").
func probeXDPHelper(f Feature) Result {
	return verdict(features.HaveProgramHelper(ebpf.XDP, helpers[f]))
}

func probeXSKMap() Result {
	return verdict(features.HaveMapType(ebpf.XSKMap))
}

// verdict reads a cilium/ebpf feature probe's answer: nil and
// ErrNotSupported are conclusive, anything else (EPERM) is not.
func verdict(err error) Result {
	switch {
	case err == nil:
		return Result{State: Present}
	case errors.Is(err, ebpf.ErrNotSupported):
		return Result{State: Missing, Detail: oneLine(err)}
	}
	return Result{State: Unknown, Detail: privilegeHint(err)}
}

// probeRxTimestampKfunc looks the kfunc up in the kernel's BTF: a kfunc is
// callable only where the kernel describes it there.
func probeRxTimestampKfunc() Result {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, os.ErrNotExist) {
			return Result{State: Missing, Detail: "the kernel has no BTF (/sys/kernel/btf/vmlinux)"}
		}
		return Result{State: Unknown, Detail: oneLine(err)}
	}
	var fn *btf.Func
	if err := spec.TypeByName("bpf_xdp_metadata_rx_timestamp", &fn); err != nil {
		return Result{State: Missing, Detail: "not in the kernel's BTF"}
	}
	return Result{State: Present}
}

// probeDevBound loads a device-bound XDP program on loopback: a kernel that
// does not know the flag refuses it with EINVAL. One that knows it goes on
// to the device, and loopback, which has no driver XDP (no ndo_bpf), is
// refused with EOPNOTSUPP: the kernel has the feature. Whether a given
// NIC's driver takes such a program is the interface's own question
// (DevBoundOn).
func probeDevBound() Result {
	err := loadDevBound(1)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return Result{State: Present, Detail: "the kernel knows BPF_F_XDP_DEV_BOUND_ONLY (loopback itself has no driver XDP)"}
	}
	return devBoundResult(err)
}

// DevBoundOn loads a tiny device-bound XDP program on ifindex, and says
// whether the kernel took it. The answer is named DevBound.
func DevBoundOn(ifindex int) Result {
	return devBoundResult(loadDevBound(ifindex))
}

func devBoundResult(err error) Result {
	r := Result{Feature: DevBound, State: Present}
	switch {
	case err == nil:
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, ebpf.ErrNotSupported):
		r.State, r.Detail = Missing, "the kernel refused BPF_F_XDP_DEV_BOUND_ONLY: "+oneLine(err)
	default:
		r.State, r.Detail = Unknown, privilegeHint(err)
	}
	return r
}

func loadDevBound(ifindex int) error {
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type:    ebpf.XDP,
		License: "GPL",
		Flags:   unix.BPF_F_XDP_DEV_BOUND_ONLY,
		Ifindex: uint32(ifindex),
		Instructions: asm.Instructions{
			asm.LoadImm(asm.R0, 2, asm.DWord), // XDP_PASS
			asm.Return(),
		},
	}, ebpf.ProgramOptions{})
	if err == nil {
		prog.Close()
	}
	return err
}

// Lightweight tunnel types (linux/lwtunnel.h) and seg6local's attributes.
const (
	lwtSeg6Local       = 7
	lwtIOAM6           = 9
	seg6LocalAction    = 1
	seg6LocalActionEnd = 1
	ioam6IptunnelTrace = 1
)

// probeLWT asks the kernel to add an IPv6 route with the tunnel's encap on
// an interface that does not exist. The kernel checks the encap type before
// it looks the device up: "lwt encapsulation type not supported"
// (EOPNOTSUPP) where it lacks it, ENODEV where it has it. No route is ever
// added, so the probe needs no scratch namespace; it needs CAP_NET_ADMIN.
func probeLWT(f Feature) Result {
	var typ uint16
	var encap []byte
	kw := "seg6local"
	switch f {
	case Seg6Local:
		typ = lwtSeg6Local
		encap = nla(seg6LocalAction, u32(seg6LocalActionEnd))
	case IOAM6Encap:
		typ = lwtIOAM6
		kw = "ioam6"
		// An empty trace: the type check comes before the attributes'.
		encap = nla(ioam6IptunnelTrace|unix.NLA_F_NESTED, nil)
	}
	// rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
	rtm := make([]byte, 12)
	rtm[0] = unix.AF_INET6
	rtm[1] = 128
	rtm[4] = unix.RT_TABLE_MAIN
	rtm[5] = unix.RTPROT_STATIC
	rtm[6] = unix.RT_SCOPE_UNIVERSE
	rtm[7] = unix.RTN_UNICAST
	dst := []byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01} // 2001:db8:ffff::1
	body := append(rtm, nla(unix.RTA_DST, dst)...)
	body = append(body, nla(unix.RTA_OIF, u32(0x7ffffff0))...) // no such interface
	body = append(body, nla(unix.RTA_ENCAP_TYPE, u16(typ))...)
	body = append(body, nla(unix.RTA_ENCAP|unix.NLA_F_NESTED, encap)...)
	_, err := netlinkRequest(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE,
		unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return Result{State: Missing, Detail: "ip route add … encap " + kw + ": lwt encapsulation type not supported"}
	case errors.Is(err, unix.ENODEV), errors.Is(err, unix.EINVAL), err == nil:
		// ENODEV: past the type check, at the (missing) device. nil
		// cannot happen with a device that is not there.
		return Result{State: Present}
	}
	return Result{State: Unknown, Detail: privilegeHint(err)}
}

// probeIOAM6 asks generic netlink for the IOAM6 family (ip ioam talks to
// it): no privileges needed.
func probeIOAM6() Result {
	_, err := GenlFamily("IOAM6")
	switch {
	case err == nil:
		return Result{State: Present}
	case errors.Is(err, unix.ENOENT):
		return Result{State: Missing, Detail: "no IOAM6 generic netlink family"}
	}
	return Result{State: Unknown, Detail: oneLine(err)}
}

// GenlFamily returns the id of the generic netlink family name; an error
// wrapping ENOENT when the kernel has none.
func GenlFamily(name string) (uint16, error) {
	const ctrlCmdGetFamily, ctrlAttrFamilyID, ctrlAttrFamilyName = 3, 1, 2
	body := []byte{ctrlCmdGetFamily, 1, 0, 0} // genlmsghdr: cmd, version
	body = append(body, nla(ctrlAttrFamilyName, append([]byte(name), 0))...)
	resp, err := netlinkRequest(unix.NETLINK_GENERIC, unix.GENL_ID_CTRL, unix.NLM_F_REQUEST, body)
	if err != nil {
		return 0, fmt.Errorf("generic netlink family %s: %w", name, err)
	}
	if len(resp) < 4 {
		return 0, fmt.Errorf("generic netlink family %s: short answer", name)
	}
	for a := resp[4:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a))
		if l < 4 || l > len(a) {
			break
		}
		if binary.NativeEndian.Uint16(a[2:])&^unix.NLA_F_NESTED == ctrlAttrFamilyID && l >= 6 {
			return binary.NativeEndian.Uint16(a[4:]), nil
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return 0, fmt.Errorf("generic netlink family %s: no id in the answer", name)
}

var seq atomic.Uint32

// netlinkRequest sends one request and returns the payload of the first
// answer that is not an ack (nil for an ack), or the kernel's error.
func netlinkRequest(proto int, typ uint16, flags uint16, body []byte) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	s := seq.Add(1)
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	msg = append(msg, body...)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags)
	binary.NativeEndian.PutUint32(msg[8:], s)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != s {
				continue
			}
			if m.Header.Type == unix.NLMSG_ERROR {
				if len(m.Data) < 4 {
					return nil, errors.New("netlink: short error")
				}
				if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
					return nil, syscall.Errno(-code)
				}
				return nil, nil
			}
			return m.Data, nil
		}
	}
}

func nla(typ uint16, v []byte) []byte {
	l := 4 + len(v)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], v)
	return b
}

func u16(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// privilegeHint is err in one line, with what the probe needed when the
// kernel said no for want of it.
func privilegeHint(err error) string {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return "needs privileges (root, or CAP_BPF and CAP_NET_ADMIN): " + oneLine(err)
	}
	return oneLine(err)
}

// oneLine is err's message cut at its first line: a verifier error carries
// its whole log.
func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
