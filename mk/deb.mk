# The Debian package (packaging/, docs/operations.md):
#
#   make deb   bin/linerate_<version>-1_amd64.deb, built by nfpm from
#              packaging/nfpm.yaml: the binary, the systemd unit, the default
#              config (inert: `linerate config service`, metrics on
#              127.0.0.1:9087), the lab as an example (its metrics on too), the
#              man page and bash completion generated from the CLI's help
#              (packaging/mkdocs)
#
# nfpm runs with `go run` at a fixed version: it stays out of go.mod.

NFPM       := github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
# A Debian version: the release, or 0.0~git<commit> between releases.
DEB_VERSION ?= $(shell v=$$(git describe --tags --abbrev=0 2>/dev/null | sed 's/^v//'); \
	if [ -n "$$v" ]; then echo $$v; else echo 0.0~git$$(git rev-parse --short HEAD 2>/dev/null || echo 0); fi)
# packaging/nfpm.yaml names the staging directory too.
DEB_STAGE  := $(BIN)/pkg

.PHONY: deb deb-dpdk

deb: build
	rm -rf $(DEB_STAGE) && mkdir -p $(DEB_STAGE)
	cp $(BIN)/linerate $(DEB_STAGE)/linerate
	strip --remove-section=.comment --remove-section=.note $(DEB_STAGE)/linerate
	$(GO) run ./packaging/mkdocs -bin $(DEB_STAGE)/linerate -out $(DEB_STAGE)
	gzip -9n < $(DEB_STAGE)/linerate.1 > $(DEB_STAGE)/linerate.1.gz
	gzip -9n < packaging/changelog > $(DEB_STAGE)/changelog.Debian.gz
	./$(DEB_STAGE)/linerate config service > $(DEB_STAGE)/linerate.toml
	./$(DEB_STAGE)/linerate config default | sed 's|^# listen = "127.0.0.1:9087"|listen = "127.0.0.1:9087"|' \
		> $(DEB_STAGE)/lab.toml
	./$(DEB_STAGE)/linerate validate --offline -c $(DEB_STAGE)/linerate.toml
	./$(DEB_STAGE)/linerate validate --offline -c $(DEB_STAGE)/lab.toml
	VERSION=$(DEB_VERSION) STAGE=$(DEB_STAGE) $(GO) run $(NFPM) package -f packaging/nfpm.yaml -p deb -t $(BIN)/

# The DPDK build as a second package, linerate-dpdk, that Depends on linerate
# and on the librte libraries its binary links. `make deb` builds it too where
# libdpdk is installed.
ifeq ($(shell pkg-config --exists libdpdk 2>/dev/null && echo yes),yes)
deb: deb-dpdk
endif

deb-dpdk: build-dpdk
	rm -rf $(BIN)/pkg-dpdk && mkdir -p $(BIN)/pkg-dpdk $(DEB_STAGE)
	cp $(BIN)/linerate-dpdk $(BIN)/pkg-dpdk/linerate-dpdk
	strip --remove-section=.comment --remove-section=.note $(BIN)/pkg-dpdk/linerate-dpdk
	gzip -9n < packaging/changelog > $(DEB_STAGE)/changelog.Debian.gz
	VERSION=$(DEB_VERSION) $(GO) run $(NFPM) package -f packaging/nfpm-dpdk.yaml -p deb -t $(BIN)/
