// Package api is the IOAM plugin's control service, linerate.v1.Ioam, as
// protobuf and the Go code generated from it. The generated files are
// committed; `make generate` rebuilds them (see mk/generate.mk).
package api

//go:generate make -C ../../.. generate-proto
