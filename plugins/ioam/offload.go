package ioam

import (
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/plugins/ioam/bpf"
)

// xdpConfig is the transit's config as its XDP program reads it. The
// program reads CLOCK_TAI and the ingress interface's index: ifindex maps
// those indexes to the stage's port ids.
func (t *transit) xdpConfig(c clock.Clock, ifindex map[int]uint16) (bpf.TransitConfig, []bpf.Namespace) {
	utcOff := -int64(kernelTAIOffset()) * 1e9
	tc := bpf.TransitConfig{Loopback: t.loop != nil, EgressID: t.eg.short, EgressIDWide: t.eg.wide,
		UTCOffset: utcOff, TAIOffset: utcOff + int64(c.Sync().TAIOffset)*1e9,
		IngressByIndex: map[int][2]uint32{}}
	for ifx, port := range ifindex {
		ids := t.ingressIDs(port)
		tc.IngressByIndex[ifx] = [2]uint32{uint32(ids.short), ids.wide}
	}
	var nss []bpf.Namespace
	for _, ns := range t.ns.ns {
		nss = append(nss, bpf.Namespace{ID: ns.ID, NodeID: ns.NodeID, NodeIDWide: ns.NodeIDWide, Data: ns.Data,
			DataWide: ns.DataWide, Timestamp: uint8(ns.Timestamp), HasSchema: ns.HasSchema, SchemaID: ns.SchemaID,
			Schema: ns.Schema})
	}
	return tc, nss
}

// kernelTAIOffset is CLOCK_TAI − CLOCK_REALTIME in seconds: the kernel's
// TAI offset, 0 until something (chrony, ptp4l) sets it.
func kernelTAIOffset() int {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		return 0
	}
	return int(tx.Tai)
}
