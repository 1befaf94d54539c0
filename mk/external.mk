# The external stage (issue 17): the example plugins, built with linerate, and
# make bench-external.
#
# First BenchmarkLend: the lcore's cost of lending a burst and taking it back
# (with a minimal peer on the same thread) beside the same packets in process,
# packets/s; and BenchmarkBurst, the plugin thread's side of a burst (read
# from the ring, run, answered) beside the same stage called in process.
# Then bench/external runs the same pass-through stage in process and out of
# process (the external stage, its plugin pinned to CPU 1), and one gRPC call
# per burst through go-plugin, side by side; see its doc. The binary is built
# into bin/, a root-owned directory as the external stage asks of a plugin's.
# BENCH_EXTERNAL_FLAGS passes more flags (-count, -runs, -ring).

BENCH_EXTERNAL_FLAGS ?=

.PHONY: build-plugins bench-external

all: build-plugins

build-plugins:
	$(GO) build -o $(BIN)/linerate-sampler ./plugins/sdk/examples/sampler
	$(GO) build -o $(BIN)/linerate-mirror ./plugins/sdk/examples/mirror

bench-external:
	$(GO) test -run XXX -bench BenchmarkLend -benchtime 200000x -count 3 ./plugins/external
	$(GO) test -run XXX -bench BenchmarkBurst -benchtime 200000x -count 3 ./plugins/sdk
	$(GO) build -o $(BIN)/bench-external ./bench/external
	./$(BIN)/bench-external $(BENCH_EXTERNAL_FLAGS)
