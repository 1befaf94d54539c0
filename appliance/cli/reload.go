package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/linerate/linerate/appliance/api"
)

const reloadUsage = `Usage: linerate reload [--check] [--control ADDR]

Asks a running appliance to read its config file again, as SIGHUP does: each
stage whose table changed takes its new table between bursts, and no packet is
dropped. A change that needs a restart (ports, pools, lcores, pipelines, a
stage that cannot reload) is refused with the key it names, and nothing is
applied. --check only says what a reload would change.

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
	switch {
	case len(r.Stages) == 0 && *check:
		fmt.Fprintf(stdout, "nothing to reload: no stage table changed in %s\n", path)
	case len(r.Stages) == 0:
		fmt.Fprintf(stdout, "reloaded: no stage table changed in %s\n", path)
	case *check:
		fmt.Fprintf(stdout, "a reload would change %d stage(s) of %s:\n", len(r.Stages), path)
	default:
		fmt.Fprintf(stdout, "reloaded %d stage(s) of %s:\n", len(r.Stages), path)
	}
	for _, s := range r.Stages {
		fmt.Fprintf(stdout, "  %s\n", s)
	}
	return 0
}
