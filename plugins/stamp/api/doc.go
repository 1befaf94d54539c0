// Package api is the STAMP plugin's control service, linerate.v1.Stamp, as
// protobuf and the Go code generated from it; srv6pm holds the seed
// controller's southbound services, which the plugin serves too. The
// generated files are committed; `make generate` rebuilds them (see
// mk/generate.mk).
package api

//go:generate make -C ../../.. generate-proto
