package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/plugins/route/api"
)

const routeUsage = `Usage: linerate route [<command> [arguments]] [flags]

Show or change a running appliance's route table (routed mode, docs/routing.md).
Changes take effect at once and drop no packet. Flags may come anywhere.

Commands:
  list                    the routed ports and their addresses, then every
                          route (also with no command)
  get ADDRESS             the route and the next hop a packet to ADDRESS takes
  add PREFIX [via ADDRESS] [dev PORT]
                          a static route, through a next hop (via) or on the
                          link of a port (dev)
  replace PREFIX [via ADDRESS] [dev PORT]
                          the same, taking the place of a static route of
                          that prefix if there is one
  del PREFIX              a static route

Flags:
`

const neighborUsage = `Usage: linerate neighbor [<command> [arguments]] [flags]

Show or change a running appliance's neighbour cache (routed mode,
docs/routing.md). Flags may come anywhere.

Commands:
  list [dev PORT]         every entry with its state (INCOMPLETE, REACHABLE,
                          STALE, PROBE, STATIC), MAC, age and probes, then the
                          cache's size and counters (also with no command)
  add ADDRESS lladdr MAC dev PORT
                          a static entry
  del ADDRESS dev PORT    any entry

Flags:
`

// client is what the route and neighbor commands share: flags, a connection,
// output.
type client struct {
	name, usage      string
	fs               *flag.FlagSet
	addr             *string
	asJSON, wide     *bool
	timeout          *time.Duration
	caFile, certFile *string
	keyFile          *string
	stdout, stderr   io.Writer
}

func newClient(name, usage string, stdout, stderr io.Writer) *client {
	c := &client{name: name, usage: usage, fs: flag.NewFlagSet(name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	c.fs.SetOutput(stderr)
	c.addr = c.fs.String("control", defaultControl(), "control API `address`: unix:/path or host:port")
	c.asJSON = c.fs.Bool("json", false, "print the reply as JSON")
	c.wide = c.fs.Bool("wide", false, "print each table row on one line, however wide")
	c.timeout = c.fs.Duration("timeout", 5*time.Second, "give up after this long")
	c.caFile = c.fs.String("tls-ca", "", "CA `file` that signed the server's certificate (turns TLS on)")
	c.certFile = c.fs.String("tls-cert", "", "client certificate `file`, for mTLS")
	c.keyFile = c.fs.String("tls-key", "", "client key `file`, for mTLS")
	c.fs.Usage = func() { c.printUsage(stderr) }
	return c
}

func (c *client) printUsage(w io.Writer) {
	fmt.Fprint(w, c.usage)
	c.fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s", f.Name, name, usage)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// command reads the flags and splits off the command: list when none is
// given. done means exit with code.
func (c *client) command(args []string) (verb string, rest []string, code int, done bool) {
	rest, code, done = c.parse(args)
	verb = "list"
	if !done && len(rest) > 0 {
		verb, rest = rest[0], rest[1:]
	}
	return verb, rest, code, done
}

// parse reads the flags; done means exit with code.
func (c *client) parse(args []string) (rest []string, code int, done bool) {
	if wantsHelp(args) {
		c.printUsage(c.stdout)
		return nil, 0, true
	}
	rest, err := parseFlags(c.fs, args)
	if err != nil {
		return nil, exitOf(err), true
	}
	return rest, 0, false
}

func (c *client) failf(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "linerate %s: "+format+"\n", append([]any{c.name}, a...)...)
	return 1
}

func (c *client) usageError(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "linerate %s: "+format+"\n\n", append([]any{c.name}, a...)...)
	c.printUsage(c.stderr)
	return 2
}

// rpcError reports a failed call the way status does.
func (c *client) rpcError(err error) int {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return c.failf("cannot reach the appliance at %s (is it running?): %s", *c.addr, status.Convert(err).Message())
	}
	return c.failf("%s", status.Convert(err).Message())
}

// dial connects to the Routing service, with a context for the call's
// deadline; release closes both.
func (c *client) dial() (rc api.RoutingClient, ctx context.Context, release func(), err error) {
	cc, err := dialControl(*c.addr, *c.caFile, *c.certFile, *c.keyFile)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *c.timeout)
	return api.NewRoutingClient(cc), ctx, func() { cancel(); cc.Close() }, nil
}

func (c *client) printJSON(msgs ...proto.Message) int {
	m := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true, Multiline: true}
	for _, msg := range msgs {
		b, err := m.Marshal(msg)
		if err != nil {
			return c.failf("%v", err)
		}
		fmt.Fprintf(c.stdout, "%s\n", b)
	}
	return 0
}

// words reads "key value" pairs after the positional arguments: via, dev,
// lladdr; flags: replace.
func words(args []string, keys []string, flags []string) (map[string]string, error) {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case contains(flags, w):
			out[w] = "true"
		case contains(keys, w):
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs a value", w)
			}
			out[w] = args[i+1]
			i++
		default:
			return nil, fmt.Errorf("unexpected %q", w)
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func cmdRoute(args []string) int { return runRoute(args, os.Stdout, os.Stderr) }

func runRoute(args []string, stdout, stderr io.Writer) int {
	c := newClient("route", routeUsage, stdout, stderr)
	verb, rest, code, done := c.command(args)
	if done {
		return code
	}
	var req proto.Message
	switch verb {
	case "list", "show":
		if len(rest) > 0 {
			return c.usageError("list takes no arguments")
		}
	case "get", "lookup":
		if len(rest) != 1 {
			return c.usageError("get needs one address")
		}
		req = &api.LookupRequest{Address: rest[0]}
	case "add", "replace":
		if len(rest) < 1 {
			return c.usageError("%s needs a prefix", verb)
		}
		kv, err := words(rest[1:], []string{"via", "dev"}, []string{"replace"})
		if err != nil {
			return c.usageError("%v", err)
		}
		req = &api.AddRouteRequest{Prefix: rest[0], Via: kv["via"], Port: kv["dev"], Replace: verb == "replace" || kv["replace"] != ""}
	case "del", "delete":
		if len(rest) != 1 {
			return c.usageError("del needs one prefix")
		}
		req = &api.DeleteRouteRequest{Prefix: rest[0]}
	default:
		return c.usageError("unknown command %q", verb)
	}
	rc, ctx, release, err := c.dial()
	if err != nil {
		return c.failf("%v", err)
	}
	defer release()
	switch r := req.(type) {
	case *api.LookupRequest:
		rep, err := rc.Lookup(ctx, r)
		if err != nil {
			return c.rpcError(err)
		}
		if *c.asJSON {
			return c.printJSON(rep)
		}
		printLookup(stdout, rep)
		return 0
	case *api.AddRouteRequest:
		rep, err := rc.AddRoute(ctx, r)
		if err != nil {
			return c.rpcError(err)
		}
		if *c.asJSON {
			return c.printJSON(rep)
		}
		done := "added"
		if rep.Replaced {
			done = "replaced"
		}
		fmt.Fprintf(stdout, "%s %s\n", done, routeLine(rep.Route))
		return 0
	case *api.DeleteRouteRequest:
		if _, err := rc.DeleteRoute(ctx, r); err != nil {
			return c.rpcError(err)
		}
		if !*c.asJSON {
			fmt.Fprintf(stdout, "deleted %s\n", r.Prefix)
		}
		return 0
	}
	ifs, err := rc.Interfaces(ctx, &api.InterfacesRequest{})
	if err != nil {
		return c.rpcError(err)
	}
	routes, err := rc.ListRoutes(ctx, &api.ListRoutesRequest{})
	if err != nil {
		return c.rpcError(err)
	}
	if *c.asJSON {
		return c.printJSON(ifs, routes)
	}
	o := table.Options{Wide: *c.wide}
	var b strings.Builder
	cols := table.Cols("PORT", "MAC", "MTU", "IFID", "ADDRESSES")
	cols[4].Wrap = true
	t := table.New(cols...)
	for _, i := range ifs.Interfaces {
		t.Add(i.Port, i.Mac, itoa(i.Mtu), itoa(i.Ifid), cmp.Or(strings.Join(i.Addresses, " "), "-"))
	}
	t.Write(&b, o)
	t = table.New(table.Cols("PREFIX", "KIND", "PORT", "VIA")...)
	for _, r := range routes.Routes {
		t.Add(r.Prefix, r.Kind, cmp.Or(r.Port, "-"), cmp.Or(r.Via, "-"))
	}
	b.WriteString("\n")
	t.Write(&b, o)
	b.WriteString("\n")
	table.Text(&b, o, 0, fmt.Sprintf("%d routes; static routes added %d, removed %d since start",
		len(routes.Routes), routes.Added, routes.Removed))
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return c.failf("%v", err)
	}
	return 0
}

func routeLine(r *api.RouteEntry) string {
	s := r.Prefix
	if r.Via != "" {
		s += " via " + r.Via
	}
	if r.Port != "" {
		s += " dev " + r.Port
	}
	return s + " (" + r.Kind + ")"
}

func printLookup(w io.Writer, r *api.LookupReply) {
	fmt.Fprintf(w, "route     %s\n", routeLine(r.Route))
	if r.NextHop == "" {
		fmt.Fprintln(w, "next hop  - (a local address)")
		return
	}
	fmt.Fprintf(w, "next hop  %s\n", r.NextHop)
	if n := r.Neighbor; n != nil {
		fmt.Fprintf(w, "neighbour %s %s, %s ago\n", cmp.Or(n.Mac, "-"), n.State, n.Age.AsDuration().Round(time.Millisecond))
	} else {
		fmt.Fprintln(w, "neighbour none yet: resolved when a packet needs it")
	}
}

func cmdNeighbor(args []string) int { return runNeighbor(args, os.Stdout, os.Stderr) }

func runNeighbor(args []string, stdout, stderr io.Writer) int {
	c := newClient("neighbor", neighborUsage, stdout, stderr)
	verb, rest, code, done := c.command(args)
	if done {
		return code
	}
	var req proto.Message
	switch verb {
	case "list", "show":
		kv, err := words(rest, []string{"dev"}, nil)
		if err != nil {
			return c.usageError("%v", err)
		}
		req = &api.ListNeighborsRequest{Port: kv["dev"]}
	case "add", "replace":
		if len(rest) < 1 {
			return c.usageError("add needs an address")
		}
		kv, err := words(rest[1:], []string{"lladdr", "dev"}, nil)
		if err != nil {
			return c.usageError("%v", err)
		}
		if kv["lladdr"] == "" || kv["dev"] == "" {
			return c.usageError("add needs lladdr MAC and dev PORT")
		}
		req = &api.AddNeighborRequest{Address: rest[0], Mac: kv["lladdr"], Port: kv["dev"]}
	case "del", "delete":
		if len(rest) < 1 {
			return c.usageError("del needs an address")
		}
		kv, err := words(rest[1:], []string{"dev"}, nil)
		if err != nil {
			return c.usageError("%v", err)
		}
		if kv["dev"] == "" {
			return c.usageError("del needs dev PORT")
		}
		req = &api.DeleteNeighborRequest{Address: rest[0], Port: kv["dev"]}
	default:
		return c.usageError("unknown command %q", verb)
	}
	rc, ctx, release, err := c.dial()
	if err != nil {
		return c.failf("%v", err)
	}
	defer release()
	switch r := req.(type) {
	case *api.AddNeighborRequest:
		if _, err := rc.AddNeighbor(ctx, r); err != nil {
			return c.rpcError(err)
		}
		if !*c.asJSON {
			fmt.Fprintf(stdout, "added %s lladdr %s dev %s\n", r.Address, r.Mac, r.Port)
		}
		return 0
	case *api.DeleteNeighborRequest:
		if _, err := rc.DeleteNeighbor(ctx, r); err != nil {
			return c.rpcError(err)
		}
		if !*c.asJSON {
			fmt.Fprintf(stdout, "deleted %s dev %s\n", r.Address, r.Port)
		}
		return 0
	}
	rep, err := rc.ListNeighbors(ctx, req.(*api.ListNeighborsRequest))
	if err != nil {
		return c.rpcError(err)
	}
	if *c.asJSON {
		return c.printJSON(rep)
	}
	o := table.Options{Wide: *c.wide}
	var b strings.Builder
	t := table.New(table.Cols("ADDRESS", "PORT", "MAC", "STATE", "AGE", "PROBES", "ROUTER")...)
	for _, n := range rep.Neighbors {
		router := "-"
		if n.Router {
			router = "yes"
		}
		t.Add(n.Address, n.Port, cmp.Or(n.Mac, "-"), n.State, n.Age.AsDuration().Round(time.Millisecond).String(),
			itoa(n.Probes), router)
	}
	t.Write(&b, o)
	b.WriteString("\n")
	table.Text(&b, o, 0, fmt.Sprintf("%d entries (capacity %d); since start: created %d, removed %d, evicted %d, failed %d",
		rep.Created-rep.Removed, rep.Capacity, rep.Created, rep.Removed, rep.Evicted, rep.Failed))
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return c.failf("%v", err)
	}
	return 0
}
