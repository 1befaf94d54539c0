// Command gf8 generates gf/gf8_amd64.s and gf/gf8_amd64.go, the GF(2^8)
// region kernels. Run it from gf/ with `go generate` or `make generate-gf`.
package main

import (
	. "github.com/mmcloughlin/avo/build"
)

func main() {
	Package("github.com/linerate/linerate/gf")
	ConstraintExpr("!noasm")
	Generate()
}
