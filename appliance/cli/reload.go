package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/api"
)

const reloadUsage = `Usage: linerate reload [--check] [--control ADDR]

Asks a running appliance to read its config file again, as SIGHUP does: each
stage whose table changed takes its new table between bursts, and no packet is
dropped; an xdp port takes new match rules without detaching. A change that
needs a restart (ports' other keys, pools, lcores, pipelines, a stage that
cannot reload) is refused with the key it names, nothing is applied, and the
exit status is 1: systemd's ExecReload runs this command, so that
'systemctl reload' fails on a refusal. --check only says what a reload would
change.

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

// daemon is the engine as `linerate run` serves it: it reads its config file
// again on SIGHUP and on the control API's Reload, and tells systemd.
type daemon struct {
	*appliance.Engine
	path string // "" is the embedded lab
	name string // the config's Path, for STATUS
	log  *slog.Logger

	mu       sync.Mutex // one reload, and its notifications, at a time
	notified bool       // READY=1 was sent: reloads may say RELOADING=1
}

// ready tells systemd the appliance runs.
func (d *daemon) ready() {
	d.mu.Lock()
	defer d.mu.Unlock()
	notify(d.log, "READY=1\nSTATUS="+d.running())
	d.notified = true
}

func (d *daemon) running() string { return fmt.Sprintf("running %s, %d lcores", d.name, d.Lcores()) }

// ReloadConfig reads the file and applies it (with check, only says what
// would change), saying in the log what it did. systemd hears RELOADING=1,
// then READY=1 with STATUS= the refusal, or the running status again.
func (d *daemon) ReloadConfig(check bool) (string, appliance.ReloadResult, error) {
	if check {
		cfg, err := loadConfig(d.path)
		if err != nil {
			return d.path, appliance.ReloadResult{}, err
		}
		res, err := d.CheckReload(cfg)
		return cfg.Path, res, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.notified {
		// MONOTONIC_USEC ties READY=1 to this reload (Type=notify-reload).
		notify(d.log, "RELOADING=1\nMONOTONIC_USEC="+strconv.FormatInt(monotonicUsec(), 10)+"\nSTATUS=reloading")
	}
	path, res, err := d.reload()
	if err != nil {
		d.log.Error("reload refused; nothing changed", "config", path, "err", err)
	} else {
		d.log.Info("reloaded", "config", path, "stages", strings.Join(res.Stages, " "), "ports", strings.Join(res.Ports, " "))
	}
	if d.notified {
		status := d.running()
		if err != nil {
			// STATUS is one line.
			status = "reload refused; nothing changed: " + strings.Join(strings.Fields(err.Error()), " ")
		}
		notify(d.log, "READY=1\nSTATUS="+status)
	}
	return path, res, err
}

func (d *daemon) reload() (string, appliance.ReloadResult, error) {
	cfg, err := loadConfig(d.path)
	if err != nil {
		return d.path, appliance.ReloadResult{}, err
	}
	res, err := d.Reload(cfg)
	return cfg.Path, res, err
}

func monotonicUsec() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() / 1000
}
