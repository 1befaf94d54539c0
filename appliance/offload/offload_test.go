package offload_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/offload/offloadtest"
)

// program is a slot calling the helpers fns, the rx-timestamp kfunc if
// kfunc, and using an XSKMAP if xsk.
func program(kfunc, xsk bool, fns ...asm.BuiltinFunc) offload.Program {
	var insns asm.Instructions
	for _, fn := range fns {
		insns = append(insns, fn.Call())
	}
	if kfunc {
		insns = append(insns, asm.Instruction{OpCode: asm.OpCode(asm.JumpClass).SetJumpOp(asm.Call),
			Src: asm.PseudoKfuncCall, Constant: -1}.WithReference("bpf_xdp_metadata_rx_timestamp"))
	}
	spec := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{}, Programs: map[string]*ebpf.ProgramSpec{}}
	if xsk {
		spec.Maps["xsks"] = &ebpf.MapSpec{Name: "xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 1}
		insns = append(insns, asm.LoadMapPtr(asm.R1, 0).WithReference("xsks"))
	}
	insns = append(insns, asm.Mov.Imm(asm.R0, offload.Next), asm.Return())
	insns[0] = insns[0].WithSymbol("slot")
	spec.Programs["slot"] = &ebpf.ProgramSpec{Name: "slot", Type: ebpf.XDP, License: "GPL", Instructions: insns}
	return offload.Program{Spec: spec, Slot: "slot"}
}

// TestProgramNeeds: what a program needs is read from its instructions:
// helpers, the kfunc (and so a device-bound program), an XSKMAP.
func TestProgramNeeds(t *testing.T) {
	for _, c := range []struct {
		p    offload.Program
		want []kernel.Feature
	}{
		{program(false, false), nil},
		{program(false, false, asm.FnKtimeGetTaiNs, asm.FnXdpAdjustHead, asm.FnKtimeGetTaiNs),
			[]kernel.Feature{kernel.XDPAdjustHead, kernel.KtimeGetTAINs}},
		{program(false, false, asm.FnMapLookupElem), nil}, // a helper every kernel has
		{program(true, true, asm.FnXdpAdjustMeta),
			[]kernel.Feature{kernel.XDPAdjustMeta, kernel.XSKMap, kernel.RxTimestampKfunc, kernel.DevBound}},
	} {
		if got := c.p.Needs(); !slices.Equal(got, c.want) {
			t.Errorf("%v: needs %v, want %v", c.p.Spec.Programs["slot"].Instructions, got, c.want)
		}
	}
	// The smallest real offload, macswap, needs nothing probed.
	spec, err := offloadtest.Spec(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := (offload.Program{Spec: spec, Slot: offloadtest.Slot}).Needs(); len(got) != 0 {
		t.Errorf("macswap needs %v", got)
	}
}

func ask(t *testing.T, mode offload.Mode, p offload.Program) *offload.Request {
	t.Helper()
	shared := map[string]any{}
	r, err := offload.Ask(func(key string, mk func() any) any {
		if shared[key] == nil {
			shared[key] = mk()
		}
		return shared[key]
	}, "refl", "lab.toml:12", mode, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRequireKernel: a program that needs what the kernel lacks (forced
// with LINERATE_KERNEL_DISABLE, so on every kernel) is declined before
// anything is loaded: with auto the stage runs in Go, the reason naming the
// feature; with xdp it is one line naming the table, the stage, the
// feature and the kernel that has it. A program needing only what the
// kernel offers is not declined.
func TestRequireKernel(t *testing.T) {
	t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
	p := program(false, false, asm.FnKtimeGetTaiNs)

	r := ask(t, offload.Auto, p)
	if err := r.RequireKernel(); err != nil {
		t.Fatalf("auto: %v", err)
	}
	if why := r.Reason(); !strings.HasPrefix(why, "the kernel lacks bpf_ktime_get_tai_ns (Linux >= 6.1)") || r.InKernel() {
		t.Errorf("auto: reason %q, in kernel %v", why, r.InKernel())
	}

	r = ask(t, offload.XDP, p)
	err := r.RequireKernel()
	want := `lab.toml:12: stage "refl": offload = "xdp": the kernel lacks bpf_ktime_get_tai_ns (Linux >= 6.1)`
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("xdp: %v, want %q", err, want)
	}

	// Nothing probed: no privileges needed, nothing declined.
	r = ask(t, offload.XDP, program(false, false, asm.FnMapLookupElem))
	if err := r.RequireKernel(); err != nil || r.Reason() != "" {
		t.Errorf("a program needing nothing probed: %v, reason %q", err, r.Reason())
	}
}

// TestDeclineOneLine: a reason of several lines (a verifier's log passed on
// whole) becomes its first line, so the error and the log line stay one.
func TestDeclineOneLine(t *testing.T) {
	r := ask(t, offload.XDP, program(false, false))
	err := r.Decline("load program: permission denied\n0: R1=ctx\n1: (b7) r0 = 16\n")
	want := `lab.toml:12: stage "refl": offload = "xdp": load program: permission denied (and 2 more lines)`
	if err == nil || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
}
