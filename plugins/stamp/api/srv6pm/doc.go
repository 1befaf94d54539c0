// Package srv6pm is the seed paper's controller API (srv6pm), which the STAMP
// plugin serves as a Session-Sender and Session-Reflector: the protos keep the
// seed's package, services, methods, message names and field numbers. The
// generated files are committed; `make generate` rebuilds them (see
// mk/generate.mk).
package srv6pm

//go:generate make -C ../../../.. generate-proto
