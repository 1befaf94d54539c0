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

# Part of `make lint`: the stages' committed objects are what their C builds
# to (clang from make deps). bpf2go's output is deterministic for one clang.
STAGE_BPF_PKGS := $(patsubst %/gen.go,%,$(wildcard plugins/*/bpf/gen.go))

lint: lint-bpf

.PHONY: lint-bpf
lint-bpf:
	@set -e; \
	command -v clang >/dev/null || { echo "make lint: clang is missing (make deps installs it)"; exit 1; }; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for d in $(STAGE_BPF_PKGS); do \
		mkdir -p "$$tmp/$$d" && cp $$d/*_bpfel.go $$d/*_bpfel.o "$$tmp/$$d/"; \
		(cd $$d && $(GEN_GO) generate . >/dev/null); \
		for f in "$$tmp/$$d"/*; do \
			if ! cmp -s "$$f" "$$d/$${f##*/}"; then \
				echo "$$d/$${f##*/} is not what its C builds to: run 'make generate-bpf' and commit it"; \
				cp "$$tmp/$$d"/* $$d/; exit 1; \
			fi; \
		done; \
	done
