// Package api is the control service between linerate and an out-of-process
// plugin, linerate.plugin.v1.StagePlugin, as protobuf and the Go code
// generated from it. The generated files are committed; `make generate`
// rebuilds them (see mk/generate.mk).
package api
