//go:build linux

package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/kernel"
)

// Attributes of IFLA_XDP (linux/if_link.h).
const (
	iflaXDP         = 43
	iflaXDPFD       = 1
	iflaXDPAttached = 2
	iflaXDPFlags    = 3
	iflaXDPProgID   = 4
)

var xdpModes = map[uint8]string{1: "native", 2: "generic", 3: "offload", 4: "multiple"}

// xdpAttached reports the XDP program on ifindex, if any: its id and mode.
func xdpAttached(ifindex int) (id uint32, mode string, ok bool) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return 0, "", false
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return 0, "", false
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		if int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return 0, "", false
		}
		for _, a := range attrs {
			if a.Attr.Type&^unix.NLA_F_NESTED != iflaXDP {
				continue
			}
			var att uint8
			for b := a.Value; len(b) >= 4; {
				l := int(binary.NativeEndian.Uint16(b[0:2]))
				t := binary.NativeEndian.Uint16(b[2:4])
				if l < 4 || l > len(b) {
					break
				}
				v := b[4:l]
				switch {
				case t == iflaXDPAttached && len(v) >= 1:
					att = v[0]
				case t == iflaXDPProgID && len(v) >= 4:
					id = binary.NativeEndian.Uint32(v)
				}
				b = b[(l+3)&^3:]
			}
			return id, xdpModes[att], att != 0
		}
	}
	return 0, "", false
}

// xdpDetach removes a netlink-attached XDP program from ifindex (ip link set
// dev X xdp off), in every mode.
func xdpDetach(ifindex int) error {
	var errs []error
	for _, flags := range []uint32{unix.XDP_FLAGS_DRV_MODE, unix.XDP_FLAGS_SKB_MODE} {
		if err := xdpSet(ifindex, -1, flags); err != nil {
			errs = append(errs, fmt.Errorf("mode %#x: %w", flags, err))
		}
	}
	if _, _, still := xdpAttached(ifindex); still {
		return errors.Join(append(errs, errors.New("still attached"))...)
	}
	return nil
}

// xdpSet attaches program fd (-1: none) to ifindex with netlink, as ip link
// does.
func xdpSet(ifindex, fd int, flags uint32) error {
	sock, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(sock)
	// nlmsghdr, ifinfomsg, IFLA_XDP { IFLA_XDP_FD, IFLA_XDP_FLAGS }
	msg := make([]byte, 16+16+4+8+8)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_SETLINK)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	msg[16] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(msg[20:], uint32(ifindex))
	binary.NativeEndian.PutUint16(msg[32:], 4+8+8)
	binary.NativeEndian.PutUint16(msg[34:], iflaXDP|unix.NLA_F_NESTED)
	binary.NativeEndian.PutUint16(msg[36:], 8)
	binary.NativeEndian.PutUint16(msg[38:], iflaXDPFD)
	binary.NativeEndian.PutUint32(msg[40:], uint32(int32(fd)))
	binary.NativeEndian.PutUint16(msg[44:], 8)
	binary.NativeEndian.PutUint16(msg[46:], iflaXDPFlags)
	binary.NativeEndian.PutUint32(msg[48:], flags)
	if err := unix.Sendto(sock, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(sock, buf, 0)
	if err != nil {
		return err
	}
	if n >= 20 && binary.NativeEndian.Uint16(buf[4:6]) == unix.NLMSG_ERROR {
		if code := int32(binary.NativeEndian.Uint32(buf[16:20])); code != 0 {
			return syscall.Errno(-code)
		}
	}
	return nil
}

// xdpFeatures is what the kernel says of an interface's driver.
type xdpFeatures struct {
	known       bool // false: the kernel does not say (before 6.3)
	native      bool // XDP in the driver (native mode)
	zeroCopy    bool // zero-copy AF_XDP
	rxTimestamp bool // the driver gives the rx timestamp kfunc its stamp
}

// devXDPFeatures asks the netdev family about ifindex (kernel.XDPFeatures),
// in the calling thread's network namespace.
func devXDPFeatures(ifindex int) xdpFeatures {
	info, err := kernel.XDPFeatures(ifindex)
	if err != nil {
		return xdpFeatures{}
	}
	return xdpFeatures{
		known:       true,
		native:      info.Act&kernel.XDPBasic != 0,
		zeroCopy:    info.Act&kernel.XDPZeroCopy != 0,
		rxTimestamp: info.RxMeta&kernel.XDPMetaTimestamp != 0,
	}
}

// vethPeer is the ifindex of ifindex's link (a veth's peer) and whether it
// is in another network namespace (IFLA_LINK_NETNSID), from RTM_GETLINK.
func vethPeer(ifindex int) (peer int, elsewhere bool) {
	const iflaLink, iflaLinkNetnsid = 5, 37
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_UNSPEC)
	if err != nil {
		return 0, false
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg ||
			int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return 0, false
		}
		for _, a := range attrs {
			switch {
			case a.Attr.Type == iflaLink && len(a.Value) >= 4:
				peer = int(int32(binary.NativeEndian.Uint32(a.Value)))
			case a.Attr.Type == iflaLinkNetnsid:
				elsewhere = true
			}
		}
		return peer, elsewhere
	}
	return 0, false
}
