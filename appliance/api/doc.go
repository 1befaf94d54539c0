// Package api holds the appliance's own control service (Appliance: status
// and stats) as protobuf and the Go code generated from it. Each plugin's
// service lives beside its plugin, in plugins/<name>/api, in the same proto
// package (linerate.v1). The generated files are committed; `make generate`
// rebuilds them (see mk/generate.mk).
package api

//go:generate make -C ../.. generate-proto
