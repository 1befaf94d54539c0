# make generate: rebuild the code generated from the protos (the appliance's
# own service in appliance/api, and each plugin's beside the plugin, in
# plugins/<name>/api; the STAMP plugin's srv6pm protos one level further
# down), and ports/dpdk/lr_meta.h (the packet metadata's C side) from
# appliance/packet.
#
# protoc comes from Debian's protobuf-compiler (with libprotobuf-dev for the
# well-known types); the plugins are the versions pinned by go.mod's tool
# directives, built into a temporary directory. The output is committed, so a
# plain `go build` never needs any of this.
#
# Protos are named from the repository root (appliance/api/x.proto,
# plugins/stamp/api/stamp.proto), which keeps their registered paths unique in
# the process; one imports another by that path.
#
# Included from the top-level Makefile. Other generators add themselves as
# further prerequisites of `generate`.

GEN_PROTOC ?= protoc
GEN_GO ?= go
GEN_API_PROTOS := $(wildcard appliance/api/*.proto plugins/*/api/*.proto plugins/*/api/*/*.proto)

.PHONY: generate generate-proto generate-meta lint-generated

generate: generate-proto generate-meta

# The packet metadata ABI: appliance/packet's Go declaration is the source, and
# internal/metagen writes the C (see the packet package doc).
GEN_META_HDR := ports/dpdk/lr_meta.h

generate-meta:
	$(GEN_GO) generate ./appliance/packet

# Part of `make lint`: the committed header must be what the generator writes
# from today's appliance/packet.
lint: lint-generated

lint-generated:
	@set -e; \
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(GEN_GO) run ./appliance/packet/internal/metagen -o "$$tmp/lr_meta.h" ./appliance/packet; \
	if ! diff -u $(GEN_META_HDR) "$$tmp/lr_meta.h"; then \
		echo "$(GEN_META_HDR) is not what appliance/packet generates (diff above): it is generated,"; \
		echo "never edited. Run 'make generate' (or 'go generate ./appliance/packet') and commit it."; \
		exit 1; \
	fi

generate-proto:
	@set -e; \
	bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; \
	$(GEN_GO) build -o "$$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go; \
	$(GEN_GO) build -o "$$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc; \
	echo "protoc $(GEN_API_PROTOS)"; \
	$(GEN_PROTOC) -I . \
		--plugin=protoc-gen-go="$$bin/protoc-gen-go" \
		--plugin=protoc-gen-go-grpc="$$bin/protoc-gen-go-grpc" \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative \
		$(GEN_API_PROTOS)
