# make generate: rebuild the Go code generated from appliance/api/*.proto.
#
# protoc comes from Debian's protobuf-compiler (with libprotobuf-dev for the
# well-known types); the plugins are the versions pinned by go.mod's tool
# directives, built into a temporary directory. The output is committed, so a
# plain `go build` never needs any of this.
#
# Protos are named from the repository root (appliance/api/x.proto), which keeps
# their registered paths unique in the process; one imports another by that path.
#
# Included from the top-level Makefile. Other generators add themselves as
# further prerequisites of `generate`.

GEN_PROTOC ?= protoc
GEN_GO ?= go
GEN_API_DIR := appliance/api
GEN_API_PROTOS := $(wildcard $(GEN_API_DIR)/*.proto)

.PHONY: generate generate-proto

generate: generate-proto

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
