//go:build linux

package kernel

import (
	"slices"

	"github.com/cilium/ebpf/asm"
)

// ProgramNeeds lists, in feature order, the probed helpers a program's
// instructions call (its functions included): what the kernel must offer
// for the verifier to take it. Derived from the program itself, so a
// stage's offload that starts calling another helper is checked for it
// without a list to keep.
func ProgramNeeds(insns asm.Instructions) []Feature {
	var out []Feature
	for _, ins := range insns {
		if !ins.IsBuiltinCall() {
			continue
		}
		fn := asm.BuiltinFunc(ins.Constant)
		for f, h := range helpers {
			if h == fn && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}
