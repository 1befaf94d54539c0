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
# The packages' version is the top entry of packaging/changelog (without its
# Debian revision, which the nfpm files give as release: "1"): the changelog
# a package ships says the version it is (TestChangelogVersion).
DEB_VERSION ?= $(shell sed -n '1s/^linerate (\(.*\)-[^-]*).*/\1/p' packaging/changelog)
# packaging/nfpm.yaml names the staging directory too.
DEB_STAGE  := $(BIN)/pkg
# The packaged binaries are hardened as Debian builds its packages: PIE, and
# immediate binding (-bindnow, Go's linker; -z now, an external one's) with
# RELRO. The DPDK build's C (cgo, ports/dpdk) gets dpkg-buildflags' flags:
# fortify, stack protector, format checks, relro and now for the link.
# TestHardening checks the result with readelf.
export DEB_BUILD_MAINT_OPTIONS := hardening=+all
DEB_GOFLAGS := -buildmode=pie
DEB_LDFLAGS := $(LDFLAGS) -bindnow
DEB_CGO_ENV  = CGO_CFLAGS="$$(dpkg-buildflags --get CFLAGS)" CGO_CPPFLAGS="$$(dpkg-buildflags --get CPPFLAGS)" \
	CGO_LDFLAGS="$$(dpkg-buildflags --get LDFLAGS)"
# make deps installs them: dpkg-buildflags and dpkg-shlibdeps are dpkg-dev's,
# readelf (TestHardening) binutils', strace runs TestUnitSyscalls, and the
# maintainer scripts' test runs init-system-helpers' deb-systemd-helper.
DEB_PKGS += dpkg-dev binutils strace init-system-helpers

.PHONY: deb deb-dpdk

# $(call shlibdeps,DIR,BINARY): DIR/shlibs is the Depends on the shared
# libraries DIR/BINARY links, as dpkg-shlibdeps finds them (with the versions
# their shlibs files ask for), run in a debian/ tree of its own under DIR as
# it expects. The nfpm files take it as ${SHLIBS_DEPENDS}.
define shlibdeps
	rm -rf $(1)/debian && mkdir -p $(1)/debian/$(2)/usr/bin
	cp $(1)/$(2) $(1)/debian/$(2)/usr/bin/
	printf 'Source: linerate\n\nPackage: $(2)\nArchitecture: any\n' > $(1)/debian/control
	cd $(1) && dpkg-shlibdeps -O debian/$(2)/usr/bin/$(2) | sed -n 's/^shlibs:Depends=//p' > shlibs
	test -s $(1)/shlibs
	rm -rf $(1)/debian
endef

deb:
	rm -rf $(DEB_STAGE) && mkdir -p $(DEB_STAGE)
	$(DEB_CGO_ENV) $(GO) build $(DEB_GOFLAGS) -ldflags '$(DEB_LDFLAGS)' -o $(DEB_STAGE)/linerate ./appliance/cmd/linerate
	strip --remove-section=.comment --remove-section=.note $(DEB_STAGE)/linerate
	$(call shlibdeps,$(DEB_STAGE),linerate)
	$(GO) run ./packaging/mkdocs -bin $(DEB_STAGE)/linerate -out $(DEB_STAGE)
	gzip -9n < $(DEB_STAGE)/linerate.1 > $(DEB_STAGE)/linerate.1.gz
	gzip -9n < packaging/changelog > $(DEB_STAGE)/changelog.Debian.gz
	./$(DEB_STAGE)/linerate config service > $(DEB_STAGE)/linerate.toml
	./$(DEB_STAGE)/linerate config default | sed 's|^# listen = "127.0.0.1:9087"|listen = "127.0.0.1:9087"|' \
		> $(DEB_STAGE)/lab.toml
	./$(DEB_STAGE)/linerate validate --offline -c $(DEB_STAGE)/linerate.toml
	./$(DEB_STAGE)/linerate validate --offline -c $(DEB_STAGE)/lab.toml
	VERSION=$(DEB_VERSION) STAGE=$(DEB_STAGE) SHLIBS_DEPENDS="$$(cat $(DEB_STAGE)/shlibs)" \
		$(GO) run $(NFPM) package -f packaging/nfpm.yaml -p deb -t $(BIN)/

# The DPDK build as a second package, linerate-dpdk, that Depends on linerate
# and on the librte libraries its binary links. `make deb` builds it too where
# libdpdk is installed.
ifeq ($(shell pkg-config --exists libdpdk 2>/dev/null && echo yes),yes)
deb: deb-dpdk
endif

deb-dpdk:
	rm -rf $(BIN)/pkg-dpdk && mkdir -p $(BIN)/pkg-dpdk $(DEB_STAGE)
	$(DEB_CGO_ENV) $(GO) build -tags dpdk $(DEB_GOFLAGS) -ldflags '$(DEB_LDFLAGS)' -o $(BIN)/pkg-dpdk/linerate-dpdk ./appliance/cmd/linerate
	strip --remove-section=.comment --remove-section=.note $(BIN)/pkg-dpdk/linerate-dpdk
	$(call shlibdeps,$(BIN)/pkg-dpdk,linerate-dpdk)
	gzip -9n < packaging/changelog > $(DEB_STAGE)/changelog.Debian.gz
	VERSION=$(DEB_VERSION) SHLIBS_DEPENDS="$$(cat $(BIN)/pkg-dpdk/shlibs)" \
		$(GO) run $(NFPM) package -f packaging/nfpm-dpdk.yaml -p deb -t $(BIN)/
