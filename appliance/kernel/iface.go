//go:build linux

package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What one network interface offers: its driver, its XDP features (what the
// kernel says, Linux >= 6.3), its receive timestamping, its queues. Each
// answers for the calling thread's network namespace, as a port opened there
// would see the interface; none needs privileges.

// XDPAct is the kernel's xdp-features of an interface (NETDEV_XDP_ACT_*,
// linux/netdev.h): what its driver does in native mode.
type XDPAct uint64

const (
	// XDPBasic: XDP_PASS, XDP_DROP, XDP_TX and XDP_ABORTED in the driver,
	// native XDP.
	XDPBasic XDPAct = 1 << iota
	// XDPRedirect: XDP_REDIRECT, which an AF_XDP socket's redirect is.
	XDPRedirect
	// XDPNdoXmit: the driver takes frames other interfaces redirect to it.
	XDPNdoXmit
	// XDPZeroCopy: AF_XDP zero-copy (the UMEM is the driver's rx memory).
	XDPZeroCopy
	// XDPHWOffload: the NIC runs the program itself.
	XDPHWOffload
	// XDPRxSG: native XDP on frames of several buffers (jumbo frames).
	XDPRxSG
	// XDPNdoXmitSG: ndo_xdp_xmit of such frames.
	XDPNdoXmitSG
)

// The names the kernel's netdev family spec gives them (ynl, ip).
var actNames = []string{"basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"}

// Names lists the bits set, by the kernel's names.
func (a XDPAct) Names() []string { return bitNames(uint64(a), actNames) }

// XDPMeta is what the driver's XDP rx metadata kfuncs give
// (NETDEV_XDP_RX_METADATA_*): a device-bound program reads them.
type XDPMeta uint64

const (
	// XDPMetaTimestamp: bpf_xdp_metadata_rx_timestamp, the NIC's rx stamp.
	XDPMetaTimestamp XDPMeta = 1 << iota
	XDPMetaHash
	XDPMetaVLANTag
)

var metaNames = []string{"timestamp", "hash", "vlan-tag"}

// Names lists the bits set, by the kernel's names.
func (m XDPMeta) Names() []string { return bitNames(uint64(m), metaNames) }

func bitNames(v uint64, names []string) []string {
	var out []string
	for i, n := range names {
		if v&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	for i := len(names); i < 64; i++ {
		if v&(1<<i) != 0 {
			out = append(out, fmt.Sprintf("bit%d", i))
		}
	}
	return out
}

// XDPInfo is the netdev family's answer for one interface.
type XDPInfo struct {
	Act    XDPAct
	RxMeta XDPMeta
	// ZCMaxSegs is the most buffers a zero-copy frame may span (1 where
	// the driver has no multi-buffer zero-copy).
	ZCMaxSegs uint32
}

// ErrNoNetdevFamily: the kernel has no netdev generic netlink family (Linux
// before 6.3), so it does not say what an interface's XDP can do.
var ErrNoNetdevFamily = errors.New("the kernel has no netdev generic netlink family (Linux < 6.3): it does not say")

// The netdev family (linux/netdev.h).
const (
	netdevCmdDevGet          = 1
	netdevADevIfindex        = 1
	netdevADevXDPFeatures    = 3
	netdevADevXDPZCMaxSegs   = 4
	netdevADevXDPRxMetadata  = 5
	netdevFamilyName         = "netdev"
	netdevFamilyVersionOfAll = 1
)

// XDPFeatures asks the kernel what the interface ifindex's driver does with
// XDP: NETDEV_CMD_DEV_GET of the netdev generic netlink family, as `ynl
// --family netdev --do dev-get` does. An error wrapping ErrNoNetdevFamily
// where the kernel is too old to say.
func XDPFeatures(ifindex int) (XDPInfo, error) {
	fam, err := GenlFamily(netdevFamilyName)
	if errors.Is(err, unix.ENOENT) {
		return XDPInfo{}, ErrNoNetdevFamily
	}
	if err != nil {
		return XDPInfo{}, err
	}
	body := []byte{netdevCmdDevGet, netdevFamilyVersionOfAll, 0, 0}
	body = append(body, nla(netdevADevIfindex, u32(uint32(ifindex)))...)
	resp, err := netlinkRequest(unix.NETLINK_GENERIC, fam, unix.NLM_F_REQUEST, body)
	if err != nil {
		return XDPInfo{}, fmt.Errorf("netdev dev-get %d: %w", ifindex, err)
	}
	if len(resp) < 4 {
		return XDPInfo{}, fmt.Errorf("netdev dev-get %d: short answer", ifindex)
	}
	var info XDPInfo
	for a := resp[4:]; len(a) >= 4; {
		l := int(binary.NativeEndian.Uint16(a))
		if l < 4 || l > len(a) {
			break
		}
		v := a[4:l]
		switch binary.NativeEndian.Uint16(a[2:]) &^ unix.NLA_F_NESTED {
		case netdevADevXDPFeatures:
			info.Act = XDPAct(uintN(v))
		case netdevADevXDPRxMetadata:
			info.RxMeta = XDPMeta(uintN(v))
		case netdevADevXDPZCMaxSegs:
			info.ZCMaxSegs = uint32(uintN(v))
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return info, nil
}

// uintN reads a netlink integer of 1, 2, 4 or 8 bytes.
func uintN(v []byte) uint64 {
	switch len(v) {
	case 1:
		return uint64(v[0])
	case 2:
		return uint64(binary.NativeEndian.Uint16(v))
	case 4:
		return uint64(binary.NativeEndian.Uint32(v))
	case 8:
		return binary.NativeEndian.Uint64(v)
	}
	return 0
}

// DriverInfo is what the kernel says of an interface's driver
// (ETHTOOL_GDRVINFO, `ethtool -i`).
type DriverInfo struct {
	Driver   string // "ixgbe", "veth", "virtio_net"
	Version  string
	Firmware string
	Bus      string // the PCI address, for a PCI NIC
}

// Driver names the interface's driver: ETHTOOL_GDRVINFO, else the driver
// its device is bound to in sysfs. An error for a device that has neither
// (loopback: "operation not supported").
func Driver(name string) (DriverInfo, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return DriverInfo{}, err
	}
	di, err := unix.IoctlGetEthtoolDrvinfo(fd, name)
	unix.Close(fd)
	if err == nil && cstr(di.Driver[:]) != "" {
		return DriverInfo{Driver: cstr(di.Driver[:]), Version: cstr(di.Version[:]), Firmware: cstr(di.Fw_version[:]),
			Bus: cstr(di.Bus_info[:])}, nil
	}
	ioctlErr := fmt.Errorf("ETHTOOL_GDRVINFO: %w", err)
	if err == nil {
		ioctlErr = errors.New("ETHTOOL_GDRVINFO names no driver")
	}
	if link, lerr := os.Readlink(filepath.Join(sysClassNet(name), "device", "driver")); lerr == nil && sameNetns(name) {
		return DriverInfo{Driver: filepath.Base(link)}, nil
	}
	return DriverInfo{}, ioctlErr
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Stamping is the interface's receive timestamping (ETHTOOL_GET_TS_INFO,
// `ethtool -T`).
type Stamping struct {
	// PHC is the index of its PTP hardware clock, /dev/ptpN; -1: none.
	PHC int
	// SoTimestamping are the SOF_TIMESTAMPING_* bits it offers.
	SoTimestamping uint32
	// RxFilters are the HWTSTAMP_FILTER_* it takes, a bit each.
	RxFilters uint32
}

// ReadStamping asks the driver what it stamps.
func ReadStamping(name string) (Stamping, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return Stamping{PHC: -1}, err
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolTsInfo(fd, name)
	if err != nil {
		return Stamping{PHC: -1}, fmt.Errorf("ETHTOOL_GET_TS_INFO: %w", err)
	}
	return Stamping{PHC: int(info.Phc_index), SoTimestamping: info.So_timestamping, RxFilters: info.Rx_filters}, nil
}

// RxHardware reports whether the NIC stamps received frames with its clock.
func (s Stamping) RxHardware() bool {
	const want = unix.SOF_TIMESTAMPING_RX_HARDWARE | unix.SOF_TIMESTAMPING_RAW_HARDWARE
	return s.SoTimestamping&want == want
}

// FilterAll reports whether it can stamp every frame, not PTP's alone
// (HWTSTAMP_FILTER_ALL).
func (s Stamping) FilterAll() bool { return s.RxFilters&(1<<unix.HWTSTAMP_FILTER_ALL) != 0 }

// RxAll is nil when the NIC can stamp every received frame with its PTP
// hardware clock, what the afpacket and xdp ports read; else why not.
func (s Stamping) RxAll() error {
	switch {
	case !s.RxHardware():
		return errors.New("the driver has no receive hardware timestamps (ethtool -T)")
	case s.PHC < 0:
		return errors.New("the driver names no PTP hardware clock (ethtool -T)")
	case !s.FilterAll():
		return errors.New("the NIC stamps PTP frames only, not every frame (no HWTSTAMP_FILTER_ALL)")
	}
	return nil
}

// Queues counts the interface's rx and tx queues as sysfs lists them
// (/sys/class/net/NAME/queues): those the driver has in use, which an
// AF_XDP socket or an rx queue of a port may bind to. An error where
// sysfs shows another network namespace than the caller's (a thread that
// joined one; `ip netns exec` mounts one of its own).
func Queues(name string) (rx, tx int, err error) {
	if !sameNetns(name) {
		return 0, 0, fmt.Errorf("/sys/class/net/%s is not this network namespace's %s", name, name)
	}
	ents, err := os.ReadDir(filepath.Join(sysClassNet(name), "queues"))
	if err != nil {
		return 0, 0, err
	}
	for _, e := range ents {
		switch {
		case strings.HasPrefix(e.Name(), "rx-"):
			rx++
		case strings.HasPrefix(e.Name(), "tx-"):
			tx++
		}
	}
	return rx, tx, nil
}

// sysRoot is where sysfs is; tests point it elsewhere.
var sysRoot = "/sys"

func sysClassNet(name string) string { return filepath.Join(sysRoot, "class", "net", name) }

// sameNetns reports whether sysfs's name is the interface the calling
// thread sees by that name: sysfs shows the network namespace of whoever
// mounted it.
func sameNetns(name string) bool {
	b, err := os.ReadFile(filepath.Join(sysClassNet(name), "ifindex"))
	if err != nil {
		return false
	}
	idx, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return false
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return false
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return false
	}
	return int(ifr.Uint32()) == idx
}
