//go:build linux

package xdp

import (
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
)

// vethTx watches a veth for the frames its XDP_TX loses. A veth delivers
// what an XDP program sends back (XDP_TX, an offload's reply) only to a peer
// with an XDP program of its own (GRO on the peer did not deliver them in
// our test on 6.18).
// Without, the frames are counted as sent by the program and lost, and only
// the veth's own rx_queue_N_xdp_tx_errors (ethtool -S) says so.
type vethTx struct {
	st     *devStats
	ifname string
	peer   string // what to call the peer in the fix
	base   uint64 // xdp_tx_errors when the port opened
	warned atomic.Bool
}

// watchVeth watches ifname when it is a veth; nil otherwise. The caller's
// thread is in its network namespace.
func watchVeth(ifname string, ifindex int) *vethTx {
	st, err := openDevStats(ifname)
	if err != nil || st.driver != "veth" {
		st.close()
		return nil
	}
	v := &vethTx{st: st, ifname: ifname, peer: "PEER"}
	v.base, _ = st.sum("rx_queue_", "_xdp_tx_errors")
	if idx, elsewhere := vethPeer(ifindex); idx > 0 && !elsewhere {
		if ifc, err := net.InterfaceByIndex(idx); err == nil {
			v.peer = ifc.Name
		}
	}
	return v
}

// check returns the XDP_TX frames lost since the port opened, and says so
// once, with the fix, the first time there are any.
func (v *vethTx) check(log *slog.Logger) uint64 {
	n, err := v.st.sum("rx_queue_", "_xdp_tx_errors")
	if err != nil || n < v.base {
		return 0
	}
	n -= v.base
	if n > 0 && !v.warned.Swap(true) {
		who := "veth peer " + v.peer
		if v.peer == "PEER" {
			who = "veth peer of " + v.ifname + " (PEER, in another namespace)"
		}
		log.Warn(fmt.Sprintf("XDP_TX frames lost: the %s has no XDP program; attach one there, any will "+
			"do: `ip link set dev %s xdp obj pass.o sec xdp` (pass.o: ports/xdp/README.md, Lab setup)", who, v.peer),
			"interface", v.ifname, "xdp_tx_errors", n)
	}
	return n
}

func (v *vethTx) close() {
	if v != nil {
		v.st.close()
	}
}
