package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/linerate/linerate/appliance/api"
)

const reloadUsage = `Usage: linerate reload [--check] [--control ADDR]

Asks a running appliance to read its config file again, as SIGHUP does: each
stage whose table changed takes its new table between bursts, and no packet is
dropped; an xdp port takes new match rules without detaching. A change that
needs a restart (ports' other keys, pools, lcores, pipelines, a stage that
cannot reload) is refused with the key it names, and nothing is applied.
--check only says what a reload would change.

Flags:
`

func cmdReload(args []string) int { return runReload(args, os.Stdout, os.Stderr) }

func runReload(args []string, stdout, stderr io.Writer) int {
	c := newClient("reload", reloadUsage, stdout, stderr)
	check := c.fs.Bool("check", false, "say what a reload would change; apply nothing")
	rest, code, done := c.parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return c.usageError("unexpected argument %q", rest[0])
	}
	cc, err := dialControl(*c.addr, *c.caFile, *c.certFile, *c.keyFile)
	if err != nil {
		return c.failf("%v", err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *c.timeout)
	defer cancel()
	r, err := api.NewApplianceClient(cc).Reload(ctx, &api.ReloadRequest{Check: *check})
	if err != nil {
		return c.rpcError(err)
	}
	if *c.asJSON {
		return c.printJSON(r)
	}
	path := r.ConfigPath
	if path == "" {
		path = "the embedded lab"
	}
	n := len(r.Stages) + len(r.Ports)
	switch {
	case n == 0 && *check:
		fmt.Fprintf(stdout, "nothing to reload: no stage table or port match rule changed in %s\n", path)
	case n == 0:
		fmt.Fprintf(stdout, "reloaded: no stage table or port match rule changed in %s\n", path)
	case *check:
		fmt.Fprintf(stdout, "a reload would change %s of %s:\n", reloadCount(r), path)
	default:
		fmt.Fprintf(stdout, "reloaded %s of %s:\n", reloadCount(r), path)
	}
	for _, s := range r.Ports {
		fmt.Fprintf(stdout, "  port %s\n", s)
	}
	for _, s := range r.Stages {
		fmt.Fprintf(stdout, "  %s\n", s)
	}
	return 0
}

// reloadCount says "2 stage(s)", "1 port(s)" or "2 stage(s) and 1 port(s)".
func reloadCount(r *api.ReloadReply) string {
	var parts []string
	if len(r.Stages) > 0 {
		parts = append(parts, fmt.Sprintf("%d stage(s)", len(r.Stages)))
	}
	if len(r.Ports) > 0 {
		parts = append(parts, fmt.Sprintf("%d port(s)", len(r.Ports)))
	}
	return strings.Join(parts, " and ")
}
