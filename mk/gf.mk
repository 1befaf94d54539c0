# make generate-gf: rebuild the GF(2^8) region kernels of every level from the
# avo generator in gf/_gen/gf8 (the gf/_gen module, so the main go.mod never
# needs avo): gf/gf8_amd64.s, its Go stubs gf/gf8_amd64.go and the kernel
# dispatch gf/gf8_dispatch_amd64.go. The output is committed: a plain
# `go build` never runs this.

.PHONY: generate-gf

generate: generate-gf

generate-gf:
	cd gf/_gen && $(GO) run ./gf8 -out ../gf8_amd64.s -stubs ../gf8_amd64.go -dispatch ../gf8_dispatch_amd64.go -pkg gf
