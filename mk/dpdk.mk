# The DPDK datapath (ports/dpdk) is built only with -tags dpdk, against Debian's
# DPDK 22.11 (dpdk, libdpdk-dev, found with pkg-config). docs/dpdk.md has the
# details.
#
#   make build-dpdk  bin/linerate-dpdk: the linerate command with the dpdk driver
#   make test-dpdk   vet, staticcheck and every test with the tag (part of `make
#                    test`); tests skip without a working EAL, and fail under CI=true
#   make bench-dpdk  the C reference loop, (a) a Go loop through ports/dpdk and
#                    (b) the engine, on one core: Mpps and the ratios (a)/C, (b)/C;
#                    BENCH_DPDK_FLAGS=-generator: linerate test's generator against
#                    a C loop sending the same frames (TestSameFrames checks they are)
#
# `make build` also builds bin/linerate-dpdk where libdpdk is installed; `make
# run` needs no system package either way.

DPDK_PKG        := $(shell pkg-config --exists libdpdk 2>/dev/null && echo yes)
BENCH_DPDK_ROUNDS ?= 5
BENCH_DPDK_DUR    ?= 2s
BENCH_DPDK_FLAGS  ?=

.PHONY: build-dpdk test-dpdk bench-dpdk

TEST_EXTRA += test-dpdk

ifeq ($(DPDK_PKG),yes)
build: build-dpdk
endif

build-dpdk:
	$(GO) build -tags dpdk -ldflags '$(LDFLAGS)' -o $(BIN)/linerate-dpdk ./appliance/cmd/linerate

# Not under the race detector: the package is cgo through and through.
test-dpdk: deps-deb
	$(GO) vet -tags dpdk ./ports/dpdk/... ./bench/dpdk/... ./appliance/all/...
	$(GO) tool staticcheck -tags dpdk ./ports/dpdk/... ./bench/dpdk/...
	CI=$${CI:-true} $(GO) test -tags dpdk $(TESTFLAGS) ./ports/dpdk/... ./bench/dpdk/...
	CI=$${CI:-true} $(GO) test -tags dpdk $(TESTFLAGS) -run DPDK ./appliance/cmd/linerate/
	CI=$${CI:-true} $(GO) test -tags 'dpdk lrcheck' $(TESTFLAGS) ./ports/dpdk/...

$(BIN)/dpdk-ref: bench/dpdk/cref/ref.c
	@mkdir -p $(BIN)
	$(CC) -O3 $$(pkg-config --cflags libdpdk) -o $@ $< $$(pkg-config --libs libdpdk) -lrte_bus_vdev

bench-dpdk: deps-deb $(BIN)/dpdk-ref
	$(GO) build -tags dpdk -o $(BIN)/dpdk-bench ./bench/dpdk
	./$(BIN)/dpdk-bench -ref $(BIN)/dpdk-ref -rounds $(BENCH_DPDK_ROUNDS) -dur $(BENCH_DPDK_DUR) $(BENCH_DPDK_FLAGS)
