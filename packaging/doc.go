// Package packaging holds what ships linerate as a Debian package: the nfpm
// descriptions the .debs are built from (nfpm.yaml, nfpm-dpdk.yaml), the
// systemd unit (linerate.service) and the DPDK build's drop-in, the
// maintainer scripts, the lintian overrides, the copyright file and the
// changelog, the IPFIX collector's example files (collectors/), and mkdocs,
// which writes the man page and bash completion from the binary's help. The
// default config is not here: it is config/service.toml (linerate config
// service), the lab example config/lab.toml; mk/deb.mk stages both. Its tests
// check the package with systemd's, Debian's and the collectors' own tools.
package packaging
