# linerate — see README.md. The two commands a newcomer needs:
#   make run    build and run the embedded lab (no root, no system package)
#   make test   install what the tests need, lint, and run every test

GO        ?= go
BIN       := bin
VERSION   := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/linerate/linerate/appliance/cli.version=$(VERSION)
# Debian packages the tests, the interop peers and the benchmarks need.
DEB_PKGS  := iproute2 tshark python3-scapy python3-grpcio python3-grpc-tools \
             protobuf-compiler libprotobuf-dev pkg-config dpdk dpdk-dev libdpdk-dev libisal-dev \
             clang llvm libbpf-dev bpftool ethtool \
             systemd prometheus pmacct lintian adduser
# Packages whose tests run without the race detector: those with cgo.
CGO_PKGS  := ./ports/dpdk/...
TESTFLAGS ?= -timeout 30m
FUZZTIME  ?= 60s
FUZZMINIMIZE ?= 5s

.PHONY: all build run test test-go test-checked deps deps-deb deps-go lint fmt generate fuzz bench clean

# Fragments in mk/ add their own targets: generators to `generate`, extra test
# suites to TEST_EXTRA (cgo datapaths), benchmarks side by side with anchors.
TEST_EXTRA :=
# The fragments come first and define rules of their own: `make` alone still means `all`.
.DEFAULT_GOAL := all
-include mk/*.mk

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/linerate ./appliance/cmd/linerate

run: build
	./$(BIN)/linerate run --duration 10s

# Tests that need a kernel feature this kernel lacks skip, naming it, under CI
# too (internal/testenv.RequireKernel): a kernel option cannot be installed.
# They record the skip in a file of this run's, listed at the end, pass or fail.
test: deps lint
	@skips=$$(mktemp -t linerate-kernel-skips.XXXXXX); rc=0; \
	LINERATE_KERNEL_SKIPS=$$skips $(MAKE) --no-print-directory test-go test-checked $(TEST_EXTRA) || rc=$$?; \
	$(GO) run ./internal/testenv/skipreport $$skips; rm -f $$skips; exit $$rc

# The race detector runs on every package without cgo; cgo packages run plainly.
test-go:
	CI=$${CI:-true} $(GO) test -race $(TESTFLAGS) $$($(GO) list ./... | grep -v -e /ports/dpdk)

# The checked build (-tags lrcheck) tracks who owns each packet buffer and
# aborts on a double free, a foreign free or a use after free: the race
# detector cannot see packet memory, which is off the Go heap.
test-checked:
	CI=$${CI:-true} $(GO) test -tags lrcheck $(TESTFLAGS) $$($(GO) list ./... | grep -v -e /ports/dpdk)

deps: deps-deb deps-go

# apt-get only what is missing, and only as root.
deps-deb:
	@missing=""; for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "make deps: missing Debian packages:$$missing (run as root)"; exit 1; fi; \
		echo "make deps: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@# The user plugins run as by default, as the package's postinst makes it:
	@# the docs' plugin examples validate against this host.
	@if [ "$$(id -u)" = 0 ] && ! getent passwd linerate-plugin >/dev/null; then \
		echo "make deps: adding the system user linerate-plugin"; \
		adduser --system --no-create-home --home /nonexistent --group --quiet linerate-plugin; \
	fi

deps-go:
	$(GO) mod download
	$(GO) build -o /dev/null honnef.co/go/tools/cmd/staticcheck

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gf/_gen/') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags lrcheck ./appliance/... ./plugins/... ./ports/... ./internal/...
	$(GO) tool staticcheck ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Every fuzz target, FUZZTIME each, one after another. Minimising a new
# input is capped at FUZZMINIMIZE: for a long input Go's minimiser can use a
# whole 60 s run (its default cap) without a single new exec.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list 'Fuzz.*' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run XXX -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg || exit 1; \
		done; \
	done

# make bench: every benchmark the project has, each beside its baseline in the same run
# (bench/report; the figures, runs and goals are its spec.go): the table of figures, ratios and
# goals with the machine they come from, bench/out/report.json, bench/out/raw.txt for
# benchstat, the scaling plots in docs/perf, and the table in docs/performance.md.
# BENCH_FLAGS passes more flags (-count 5, -pkg 'rlnc|gf', -strict).
BENCH_FLAGS ?=
bench: deps-deb
	$(GO) run ./bench/report -plots docs/perf -doc docs/performance.md -readmes $(BENCH_FLAGS)

# make bench-quick: the same in quick mode (100 iterations, once, the figures' smallest
# sizes): that every benchmark runs and the report is written. Not a measurement: it
# writes only to bench/out.
.PHONY: bench-quick
bench-quick:
	$(GO) run ./bench/report -short $(BENCH_FLAGS)

clean:
	rm -rf $(BIN)
