// Package xdp is the eBPF/XDP datapath for any Linux interface: an XDP
// dispatcher program takes what the port's match rules name (and runs the
// stages' in-kernel offloads, appliance/offload) and leaves everything else
// to the kernel; what it takes reaches the engine through one AF_XDP socket
// per queue, whose UMEM is the port's packet pool. README.md is the user's
// guide.
package xdp
