# make generate: rebuild the eBPF objects and their Go wrappers (bpf2go, from
# go.mod's tool directive) from the C beside each package: the xdp port's
# dispatcher (ports/xdp/bpf) and the stages' offloads (appliance/offload/
# offloadtest/bpf, plugins/*/bpf: each stage's C beside the plugin whose
# behaviour it implements). clang, llvm and libbpf-dev come from make deps.
# The output is committed: a plain `go build` needs no clang.

GEN_BPF_PKGS ?= ./ports/xdp ./appliance/offload/offloadtest $(addprefix ./,$(patsubst %/gen.go,%,$(wildcard plugins/*/bpf/gen.go)))

.PHONY: generate-bpf

generate: generate-bpf

generate-bpf:
	$(GEN_GO) generate $(GEN_BPF_PKGS)
