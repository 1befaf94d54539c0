package offload

import (
	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// BindToDevice makes program prog of spec device-bound to the interface
// ifindex, so it may call the driver's rx metadata kfuncs (and attaches only
// there); ifindex 0 leaves it plain, for prog.Run. Every variant pair built
// from one C source goes through here.
func BindToDevice(spec *ebpf.CollectionSpec, prog string, ifindex int) {
	if ifindex == 0 {
		return
	}
	ps := spec.Programs[prog]
	ps.Flags |= unix.BPF_F_XDP_DEV_BOUND_ONLY
	ps.Ifindex = uint32(ifindex)
}
