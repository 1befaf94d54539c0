// Package all links every built-in stage kind and port driver into a program.
// Import it for its side effects, as the linerate command does.
package all

import (
	_ "github.com/linerate/linerate/plugins/builtin"  // forward, classify, generator, sink, link, counter
	_ "github.com/linerate/linerate/plugins/external" // external: a stage in a plugin process
	_ "github.com/linerate/linerate/plugins/ioam"     // ioam.encap, ioam.transit, ioam.decap
	_ "github.com/linerate/linerate/plugins/rlnc"     // rlnc.encoder, rlnc.recoder, rlnc.decoder
	_ "github.com/linerate/linerate/plugins/route"    // neighbor, route, icmp, punt (routed mode)
	_ "github.com/linerate/linerate/plugins/stamp"    // stamp.sender, stamp.reflector, stamp.collector
	_ "github.com/linerate/linerate/ports/afpacket"
	_ "github.com/linerate/linerate/ports/dpdk" // with -tags dpdk; without, it says so
	_ "github.com/linerate/linerate/ports/mem"
	_ "github.com/linerate/linerate/ports/memif"
	_ "github.com/linerate/linerate/ports/pcap"
	_ "github.com/linerate/linerate/ports/tap"
	_ "github.com/linerate/linerate/ports/xdp" // AF_XDP with an XDP dispatcher; the host keeps the rest
)
