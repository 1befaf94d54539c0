//go:build linux

package kernel

// Helpers are the XDP helpers the probes try, for the test that holds them
// to a real program's load.
var Helpers = helpers
