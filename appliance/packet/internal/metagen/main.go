// Command metagen writes the C side of the packet metadata ABI from its Go
// declaration: ports/dpdk/lr_meta.h from appliance/packet. `go generate
// ./appliance/packet` (or `make generate`) runs it; `make lint` and
// TestHeaderUpToDate fail when the committed header is stale.
//
// It type-checks the package with go/types, for 64-bit gc (the only layout
// packet.Packet has: its init checks MetaSize), and writes what the Go source
// marks with a //metagen:c directive:
//
//   - on a struct type, "//metagen:c NAME": struct NAME, field for field
//     (nested structs flattened, outer_inner), with a static assert of every
//     offset and of the size. Padding must be explicit (a _ field): both
//     languages then see the same fields.
//   - on a const declaration or spec, "//metagen:c": a macro for each exported
//     constant, LR_ and its name in upper snake case, prefixed by its type's name
//     when the name does not start with it (Continue of type Verdict:
//     LR_VERDICT_CONTINUE).
//   - on a function or method, "//metagen:c NAME": static inline C, translated
//     from the Go body. The Go function is the one description; C gets what it
//     says. The translation takes a small subset of Go and rejects the rest
//     with its position: integer and bool locals and parameters, a receiver or
//     parameter that points at the struct, assignments (tuples whose right
//     sides read none of their targets), if, tagless switch, return, calls of
//     other translated functions, conversions between integer types, the
//     operators but / and %, shifts by constants, and (*Packet).Data() indexed
//     as bytes. Bounds are Go's to check: the C does not.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "", "write the header to `file` (default: standard output)")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	h, err := Generate(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "metagen:", err)
		os.Exit(1)
	}
	if *out == "" {
		os.Stdout.Write(h)
		return
	}
	if old, err := os.ReadFile(*out); err == nil && bytes.Equal(old, h) {
		return // unchanged: keep the file's mtime, so cgo does not rebuild
	}
	if err := os.WriteFile(*out, h, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "metagen:", err)
		os.Exit(1)
	}
}
