# STAMP (plugins/stamp).
#
# make generate (generate-srv6pm): the seed controller's southbound protos in
# appliance/api/srv6pm, a subdirectory that mk/generate.mk's wildcard does not
# cover; linerate's own appliance/api/stamp.proto is generated there.
#
# make bench-stamp: the engine on mem ports mixing data traffic with 0, 1, 10
# and 100% STAMP, for the reflector and for the collector, like the seed
# paper's Figs. 15-16; then the per-core stage benchmarks. BENCH_STAMP_FLAGS
# passes flags to the program (-count 2000000, -runs 3, -size 128).

GEN_SRV6PM_PROTOS := $(wildcard appliance/api/srv6pm/*.proto)
BENCH_STAMP_FLAGS ?=

.PHONY: generate-srv6pm bench-stamp

generate: generate-srv6pm

generate-srv6pm:
	@set -e; \
	bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; \
	$(GEN_GO) build -o "$$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go; \
	$(GEN_GO) build -o "$$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc; \
	echo "protoc $(GEN_SRV6PM_PROTOS)"; \
	$(GEN_PROTOC) -I . \
		--plugin=protoc-gen-go="$$bin/protoc-gen-go" \
		--plugin=protoc-gen-go-grpc="$$bin/protoc-gen-go-grpc" \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative \
		$(GEN_SRV6PM_PROTOS)

bench-stamp:
	$(GO) run ./bench/stamp $(BENCH_STAMP_FLAGS)
	$(GO) test -run XXX -bench 'Benchmark(Reflector|Collector|Sender)' -benchtime 2s ./plugins/stamp
