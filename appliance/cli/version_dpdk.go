//go:build dpdk

package cli

// #cgo pkg-config: libdpdk
// #include <rte_version.h>
import "C"

// The DPDK build says so in `linerate version`, with the version of the
// DPDK libraries it runs on (rte_version: "DPDK 22.11.11"), which is what a
// bug report about the dpdk driver needs.
func init() { buildNote = "DPDK build, " + C.GoString(C.rte_version()) }
