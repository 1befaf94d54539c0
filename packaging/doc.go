// Package packaging holds what ships linerate as a Debian package: the
// systemd unit (linerate.service), the default config, the copyright file and
// the changelog, and the nfpm description the .deb is built from. Its tests
// check them with systemd's and Debian's own tools.
package packaging
