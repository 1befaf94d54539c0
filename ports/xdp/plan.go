//go:build linux

package xdp

import (
	"fmt"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/ports"
)

// plan is what a port of o would get of this host, told without loading or
// attaching anything (linerate doctor -c): its rx timestamps, its XDP
// mode, its AF_XDP sockets. The caller's thread is in the interface's
// network namespace.
func plan(o Options, ifindex int) []ports.Finding {
	subject := fmt.Sprintf("port %q", o.Name)
	var out []ports.Finding
	_, host := o.Clock.(*clock.System)
	host = host || o.Clock == nil
	ifc := ifaceOf(o.Interface, ifindex)
	if rx, err := planRx(o.RxTimestamp, ifc, host, nil); err != nil {
		out = append(out, ports.Finding{Subject: subject, Need: "rx timestamps", Outcome: ports.Fails, Detail: err.Error()})
	} else {
		out = append(out, rx.finding(o.Name))
	}
	feat := ifc.feat
	attach := ports.Finding{Subject: subject, Need: "XDP attach", Outcome: ports.AsAsked}
	switch {
	case kernel.Probe(kernel.Loop).State == kernel.Missing:
		attach.Outcome, attach.Detail = ports.Fails, kernel.Probe(kernel.Loop).Err().Error()
	case o.Attach == "generic":
		attach.Detail = "generic mode, as asked"
	case !feat.known:
		attach.Detail = "native mode where the driver has it, else generic: this kernel tells only by attaching"
	case feat.native:
		attach.Detail = "native mode"
	case o.Attach == "native":
		attach.Outcome, attach.Detail = ports.Fails, o.Interface+"'s driver has no native XDP"
	default:
		attach.Outcome, attach.Detail = ports.FallsBack, "generic mode: "+o.Interface+"'s driver has no native XDP"
	}
	out = append(out, attach)
	xsk := ports.Finding{Subject: subject, Need: "AF_XDP", Outcome: ports.AsAsked}
	zc := feat.known && feat.zeroCopy && (feat.native && o.Attach != "generic")
	switch {
	case kernel.Probe(kernel.XSKMap).State == kernel.Missing:
		xsk.Outcome, xsk.Detail = ports.Fails, kernel.Probe(kernel.XSKMap).Err().Error()
	case o.Bind == "copy":
		xsk.Detail = "copy mode, as asked"
	case !feat.known:
		xsk.Detail = "zero-copy where the driver has it, else copy: this kernel tells only by binding"
	case zc:
		xsk.Detail = "zero-copy"
	case o.Bind == "zerocopy":
		xsk.Outcome, xsk.Detail = ports.Fails, "zero-copy: "+o.Interface+"'s driver has none in native mode"
	default:
		xsk.Outcome, xsk.Detail = ports.FallsBack, "copy mode: "+o.Interface+"'s driver has no zero-copy AF_XDP"
	}
	return append(out, xsk)
}
