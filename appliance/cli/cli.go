// Package cli is the linerate command: it runs a config's pipelines on pinned
// lcores, validates configs, and talks to a running appliance. A program that
// imports the stages and port drivers it wants and calls Main is a linerate
// binary, as appliance/cmd/linerate is; docs/examples/custom builds one with a
// stage of its own.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/linerate/linerate/ports"
)

// version is set by the Makefile with
// -ldflags "-X github.com/linerate/linerate/appliance/cli.version=…".
var version = ""

// buildNote says what build this is beyond its version: the DPDK build's
// version_dpdk.go sets it, with the DPDK it runs on.
var buildNote = ""

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

type command struct {
	name    string
	summary string
	run     func(args []string) int
}

var commands []command

func init() {
	commands = []command{
		{"run", "run a config's pipelines (the embedded lab without -c)", cmdRun},
		{"validate", "check a config file: keys, types, values and every stage", cmdValidate},
		{"doctor", "say what this host offers linerate, and what a config gets of it (-c)", cmdDoctor},
		{"config", "print a config: the lab (config default), the service's inert one (config service)", cmdConfig},
		{"status", "show a running appliance's status and stats", cmdStatus},
		{"reload", "make a running appliance read its config file again (as SIGHUP)", cmdReload},
		{"route", "show or change the route table (routed mode)", cmdRoute},
		{"neighbor", "show or change the neighbour cache (routed mode)", cmdNeighbor},
		{"stamp", "STAMP sessions: list, create, start, stop, destroy, results, watch", cmdStamp},
		{"ioam", "IOAM tools: pot-keys deals Proof of Transit key files", cmdIoam},
		{"plugins", "show the out-of-process plugins: state, restarts, counters", cmdPlugins},
		{"test", "benchmark a device: NDR, PDR and latency per frame size (RFC 2544, MLRsearch)", cmdTest},
		{"stages", "list the stage kinds this binary knows", cmdStages},
		{"version", "print the version", cmdVersion},
	}
}

// usage is the top-level help: to stdout when asked for, to stderr beside an
// error.
func usage(w io.Writer) {
	fmt.Fprintf(w, `linerate — a high-rate packet appliance: IOAM, STAMP and RLNC on pinned lcores.

Usage:
  linerate <command> [flags]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Run 'linerate <command> --help' for a command's flags; they may come before or
after its arguments.
'linerate run' with no config runs the embedded lab for as long as --duration says.
`)
}

// Main runs the command line in os.Args with the stages and port drivers
// linked into the program, then exits with the command's status. It never
// returns.
func Main() {
	code := dispatch(os.Args[1:])
	ports.RunAtExit() // driver runtimes that end with the process (DPDK's EAL)
	os.Exit(code)
}

func dispatch(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "--help", "help":
		if len(args) > 1 {
			return dispatch(append(slices.Clone(args[1:]), "--help"))
		}
		usage(os.Stdout)
		return 0
	case "--version", "-version":
		return cmdVersion(nil)
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "linerate: unknown command %q\n\n", name)
	usage(os.Stderr)
	return 2
}

func cmdVersion(args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: linerate version\n\nPrints linerate's version, and whether it is the DPDK build (with DPDK's version).\n")
	}
	if code, ok := parseOnly(fs, args, ""); !ok {
		return code
	}
	if buildNote != "" {
		fmt.Printf("linerate %s (%s)\n", versionString(), buildNote)
		return 0
	}
	fmt.Printf("linerate %s\n", versionString())
	return 0
}

// fail prints an error the way every command does.
func fail(format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	fmt.Fprint(os.Stderr, "linerate: "+msg)
	return 1
}

// parseFlags reads fs's flags wherever they stand among args, as users expect
// ("route get ADDR --control X" as well as "route --control X get ADDR"), and
// returns the other arguments in order. A "--" ends the flags: what follows it
// is all arguments. Every command parses its flags here.
//
// Help asked for (-h, --help) is fs.Usage on stdout, and flag.ErrHelp: the
// command exits 0. A usage error keeps fs's output, stderr.
// parseOnly parses the args of a command that takes flags and no operand:
// help goes to stdout (status 0); a bad flag, or an argument left over,
// named with hint, is a usage error (2). ok is false when the command is to
// return code.
func parseOnly(fs *flag.FlagSet, args []string, hint string) (code int, ok bool) {
	rest, err := parseFlags(fs, args)
	if err != nil {
		return exitOf(err), false
	}
	if len(rest) > 0 {
		fmt.Fprintf(fs.Output(), "linerate %s: unexpected argument %q%s\n\n", fs.Name(), rest[0], hint)
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// exitOf is the status of a parseFlags error: 0 for help, which was
// printed, else 2, a usage error, which the flag package has told.
func exitOf(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	if wantsHelp(args) {
		out := fs.Output()
		fs.SetOutput(os.Stdout)
		fs.Usage()
		fs.SetOutput(out)
		return nil, flag.ErrHelp
	}
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return rest, nil
		}
		if k := len(args) - len(left); k > 0 && args[k-1] == "--" && !isFlagValue(fs, args, k-1) {
			return append(rest, left...), nil
		}
		// flag stopped at an argument: keep it and read on.
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// isFlagValue reports whether args[i] is the value of the flag before it
// ("--stage --" names a stage "--"), not the end of the flags.
func isFlagValue(fs *flag.FlagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	name, ok := strings.CutPrefix(args[i-1], "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimPrefix(name, "-"))
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}
