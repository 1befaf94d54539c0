// Package api holds the control plane's protobuf definitions, one .proto file per
// service, and the Go code generated from them. The generated files are
// committed; `make generate` rebuilds them (see mk/generate.mk).
package api

//go:generate make -C ../.. generate-proto
