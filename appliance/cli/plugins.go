package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/plugins/external/api"
)

const pluginsUsage = `Usage: linerate plugins [flags]

List a running appliance's out-of-process plugins (external stages,
plugins/external/README.md): each stage's plugin binary, its state (starting,
up, down while it waits to restart, stopped), process id, restarts and losses
(deaths and hangs), the stage's counters on linerate's side, and the plugin's
own counters from its Stats, each named plugin.<name> (a plugin's copies is
plugin.copies, apart from the stage's copies).

Flags:
`

func cmdPlugins(args []string) int { return runPlugins(args, os.Stdout, os.Stderr) }

func runPlugins(args []string, stdout, stderr io.Writer) int {
	c := newClient("plugins", pluginsUsage, stdout, stderr)
	rest, code, done := c.parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return c.usageError("plugins takes no arguments")
	}
	cc, err := dialControl(*c.addr, *c.caFile, *c.certFile, *c.keyFile)
	if err != nil {
		return c.failf("%v", err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *c.timeout)
	defer cancel()
	rep, err := api.NewExternalClient(cc).ListPlugins(ctx, &api.ListPluginsRequest{})
	if err != nil {
		return c.rpcError(err)
	}
	if *c.asJSON {
		return c.printJSON(rep)
	}
	printPlugins(stdout, table.Options{Wide: *c.wide}, rep)
	return 0
}

func printPlugins(w io.Writer, o table.Options, rep *api.ListPluginsReply) {
	if len(rep.Plugins) == 0 {
		fmt.Fprintln(w, "no external stages")
		return
	}
	cols := table.Cols("STAGE", "PIPELINE", "STATE", "PID", "RESTARTS", "LOST", "PLUGIN", "STAGE COUNTERS", "PLUGIN COUNTERS")
	cols[3].Right, cols[4].Right, cols[5].Right = true, true, true
	cols[6].Wrap = true
	cols[7].Wrap, cols[7].Detail = true, true
	cols[8].Wrap, cols[8].Detail = true, true
	t := table.New(cols...)
	t.Key = 1
	for _, p := range rep.Plugins {
		pid := "-"
		if p.Pid > 0 {
			pid = strconv.Itoa(int(p.Pid))
		}
		t.Add(p.Stage, p.Pipeline, p.State, pid, u64(p.Restarts), u64(p.Lost), filepath.Clean(p.Plugin),
			extras(p.StageCounters), pluginCounters(p.Counters))
	}
	t.Write(w, o)
}

// pluginCounters is the plugin's own counters, each named plugin.<name>: a
// plugin may name a counter as the stage names one of its own (copies), and
// neither must pass for the other.
func pluginCounters(m map[string]uint64) string {
	own := make(map[string]uint64, len(m))
	for k, v := range m {
		own["plugin."+k] = v
	}
	return extras(own)
}
