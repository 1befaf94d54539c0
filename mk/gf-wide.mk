# make generate-gf-wide: rebuild gf/wide_amd64.s and its Go stubs, the region
# kernels for GF(2), GF(2^4) and GF(2^16), from the avo generator in
# gf/_gen/wide (the gf/_gen module). The output is committed, so a plain
# `go build` never needs avo.

.PHONY: generate-gf-wide

generate: generate-gf-wide

generate-gf-wide:
	cd gf/_gen && $(GO) run ./wide -out ../wide_amd64.s -stubs ../wide_amd64.go -pkg gf
