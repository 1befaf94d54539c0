package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/linerate/linerate/appliance/api"
	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/config"
)

const statusUsage = `Usage: linerate status [flags]

Show a running appliance's status: version, state, ports, pipelines, lcores
with their loop-gap percentiles, and drops by reason. --stats adds every
counter: per port, per stage, per pool, and the stage histograms.

Flags:
`

// dialControl connects to the control API at addr, over TLS when any of the
// files is given.
func dialControl(addr, caFile, certFile, keyFile string) (*grpc.ClientConn, error) {
	var opts []grpc.DialOption
	if caFile != "" || certFile != "" || keyFile != "" {
		creds, err := control.ClientTLS(caFile, certFile, keyFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(creds))
	}
	return control.Dial(addr, opts...)
}

// defaultControl is the config's default control address.
// defaultControl is where run listens by default, for this user: the clients
// must look where the server is.
func defaultControl() string {
	var f config.File
	f.Defaults()
	return controlAddr(&f)
}

func cmdStatus(args []string) int { return runStatus(args, os.Stdout, os.Stderr) }

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("control", defaultControl(), "control API `address`: unix:/path or host:port")
	asJSON := fs.Bool("json", false, "print JSON ({\"status\": …, \"stats\": …}) instead of tables")
	full := fs.Bool("stats", false, "print every counter; with --json, the raw histogram buckets too")
	wide := fs.Bool("wide", false, "print each table row on one line, however wide")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	caFile := fs.String("tls-ca", "", "CA `file` that signed the server's certificate (turns TLS on)")
	certFile := fs.String("tls-cert", "", "client certificate `file`, for mTLS")
	keyFile := fs.String("tls-key", "", "client key `file`, for mTLS")
	fs.Usage = func() { printUsage(stderr, fs) }
	if wantsHelp(args) {
		printUsage(stdout, fs)
		return 0
	}
	if code, ok := parseOnly(fs, args, ""); !ok {
		return code
	}
	failf := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "linerate status: "+format+"\n", a...)
		return 1
	}

	cc, err := dialControl(*addr, *caFile, *certFile, *keyFile)
	if err != nil {
		return failf("%v", err)
	}
	defer cc.Close()
	client := api.NewApplianceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	st, err := client.Status(ctx, &api.StatusRequest{})
	if err != nil {
		if status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded {
			return failf("cannot reach the appliance at %s (is it running?): %s", *addr, status.Convert(err).Message())
		}
		return failf("status: %s", status.Convert(err).Message())
	}
	stats, err := client.Stats(ctx, &api.StatsRequest{OmitBuckets: !(*asJSON && *full)})
	var statsErr error
	if err != nil {
		if status.Code(err) != codes.Unavailable {
			return failf("stats: %s", status.Convert(err).Message())
		}
		statsErr, stats = err, nil // starting: no counters yet
	}

	if *asJSON {
		if err := writeStatusJSON(stdout, st, stats); err != nil {
			return failf("%v", err)
		}
		return 0
	}
	var b strings.Builder
	printStatus(&b, table.Options{Wide: *wide}, *addr, st, stats, *full)
	if statsErr != nil {
		fmt.Fprintf(&b, "\nno stats yet: %s\n", status.Convert(statsErr).Message())
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return failf("%v", err)
	}
	return 0
}

// wantsHelp reports a help flag before any "--", so help goes to stdout.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}

func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, statusUsage)
	fs.VisitAll(func(f *flag.Flag) {
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

func writeStatusJSON(w io.Writer, st *api.StatusReply, stats *api.StatsReply) error {
	m := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
	out := map[string]json.RawMessage{}
	add := func(name string, msg proto.Message) error {
		b, err := m.Marshal(msg)
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		out[name] = b
		return nil
	}
	if err := add("status", st); err != nil {
		return err
	}
	if stats != nil {
		if err := add("stats", stats); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func printStatus(w io.Writer, o table.Options, addr string, st *api.StatusReply, stats *api.StatsReply, full bool) {
	state := stateName(st.GetState())
	if st.GetStarted() != nil {
		state += fmt.Sprintf(", up %s since %s", st.GetUptime().AsDuration().Round(time.Second),
			st.GetStarted().AsTime().Local().Format("2006-01-02 15:04:05 MST"))
	}
	head := table.New(table.Column{}, table.Column{Wrap: true})
	head.Add("linerate "+st.GetVersion(), state)
	head.Add("config", cmp.Or(st.GetConfigPath(), "(embedded lab)"))
	head.Add("control", addr)
	head.Write(w, o)

	portStats := map[string]*api.PortStats{}
	for _, p := range stats.GetPorts() {
		portStats[p.Name] = p
	}
	t := table.New(table.Cols("PORT", "DRIVER", "LINK", "MTU", "RXQ", "TXQ", "MAC", "TIMESTAMPS", "RX PACKETS", "TX PACKETS")...)
	for _, p := range st.GetPorts() {
		ps := portStats[p.Name]
		t.Add(p.Name, p.Driver, upDown(p.LinkUp), itoa(p.Mtu), itoa(p.RxQueues), itoa(p.TxQueues), cmp.Or(p.Mac, "-"),
			cmp.Or(p.TimestampSource, "-"), count(ps != nil, ps.GetRxPackets()), count(ps != nil, ps.GetTxPackets()))
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	t = table.New(table.Column{Name: "PIPELINE"}, table.Column{Name: "LCORES", Wrap: true}, table.Column{Name: "STAGES", Wrap: true})
	for _, p := range st.GetPipelines() {
		t.Add(p.Name, joinInts(p.Lcores), strings.Join(p.Stages, " → "))
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	lcoreStats := map[int32]*api.LcoreStats{}
	for _, l := range stats.GetLcores() {
		lcoreStats[l.Id] = l
	}
	cols := table.Cols("LCORE", "CPU", "PIPELINES", "LOOPS", "BUSY", "PACKETS", "GAP P50", "P90", "P99", "P99.9", "MAX")
	cols[2].Wrap = true
	t = table.New(cols...)
	for _, l := range st.GetLcores() {
		row := []string{strconv.Itoa(int(l.Id)), cpuName(l.Cpu), cmp.Or(strings.Join(l.Pipelines, ","), "-"),
			"-", "-", "-", "-", "-", "-", "-", "-"}
		if ls := lcoreStats[l.Id]; ls != nil {
			row[3], row[4], row[5] = strconv.FormatUint(ls.Loops, 10), percent(ls.BusyLoops, ls.Loops), strconv.FormatUint(ls.Packets, 10)
			if g := ls.GetLoopGap(); g.GetCount() > 0 {
				copy(row[6:], []string{fmtNs(g.P50), fmtNs(g.P90), fmtNs(g.P99), fmtNs(g.P999), fmtNs(g.Max)})
			}
		}
		t.Add(row...)
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	if stats == nil {
		return
	}
	drops := slices.Clone(stats.GetDrops())
	drops = slices.DeleteFunc(drops, func(d *api.DropCount) bool { return d.Count == 0 })
	slices.SortFunc(drops, func(a, b *api.DropCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Reason, b.Reason))
	})
	if len(drops) == 0 {
		fmt.Fprintln(w, "\nno drops")
	} else {
		t = table.New(table.Cols("DROP REASON", "PACKETS")...)
		for _, d := range drops {
			t.Add(d.Reason, strconv.FormatUint(d.Count, 10))
		}
		fmt.Fprintln(w)
		t.Write(w, o)
	}
	if full {
		printStats(w, o, stats)
	}
}

// printStats is --stats: every counter.
func printStats(w io.Writer, o table.Options, s *api.StatsReply) {
	cols := table.Cols("PORT", "RX PACKETS", "RX BYTES", "TX PACKETS", "TX BYTES", "RX DROPPED", "TX DROPPED", "RX ERRORS",
		"DRIVER COUNTERS")
	cols[8].Wrap, cols[8].Detail = true, true
	t := table.New(cols...)
	for _, p := range s.GetPorts() {
		t.Add(p.Name, u64(p.RxPackets), u64(p.RxBytes), u64(p.TxPackets), u64(p.TxBytes), u64(p.RxDropped),
			u64(p.TxDropped), u64(p.RxErrors), extras(p.Extra))
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	cols = table.Cols("PIPELINE", "STAGE", "KIND", "LCORE", "PACKETS", "COUNTERS", "DROPS")
	cols[5].Wrap, cols[5].Detail = true, true
	cols[6].Wrap, cols[6].Detail = true, true
	t = table.New(cols...)
	t.Key = 2
	for _, st := range s.GetStages() {
		var cs, ds []string
		for _, c := range st.Counters {
			cs = append(cs, c.Name+"="+strconv.FormatUint(c.Value, 10))
		}
		for _, d := range st.Drops {
			ds = append(ds, d.Reason+"="+strconv.FormatUint(d.Count, 10))
		}
		t.Add(cmp.Or(st.Pipeline, "-"), st.Name, st.Kind, cpuName(st.Lcore), u64(st.Packets),
			cmp.Or(strings.Join(cs, " "), "-"), cmp.Or(strings.Join(ds, " "), "-"))
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	t = table.New(table.Cols("POOL", "SIZE", "IN USE", "ALLOC FAILURES", "COPIES")...)
	for _, p := range s.GetPools() {
		t.Add(p.Name, itoa(p.Size), itoa(p.InUse), u64(p.AllocFailures), u64(p.Copies))
	}
	fmt.Fprintln(w)
	t.Write(w, o)

	if len(s.GetHistograms()) > 0 {
		hs := slices.Clone(s.GetHistograms())
		slices.SortStableFunc(hs, func(a, b *api.NamedHistogram) int { return strings.Compare(a.Owner, b.Owner) })
		rows := make([]histRow, len(hs))
		for i, h := range hs {
			g := h.GetHistogram()
			f := func(v uint64) string {
				if g.GetCount() == 0 {
					return "-"
				}
				return fmtUnit(v, h.Unit)
			}
			rows[i] = histRow{h.Owner, h.Name, []string{u64(g.GetCount()), f(g.GetMin()), f(uint64(g.GetMean() + 0.5)),
				f(g.GetP50()), f(g.GetP90()), f(g.GetP99()), f(g.GetP999()), f(g.GetMax())}}
		}
		fmt.Fprintln(w)
		histTable(rows).Write(w, o)
	}
}

func stateName(s api.State) string {
	if s == api.State_STATE_UNSPECIFIED {
		return "unknown"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "STATE_"))
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

func cpuName(cpu int32) string {
	if cpu < 0 {
		return "-"
	}
	return strconv.Itoa(int(cpu))
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// itoa prints any integer of the API's messages.
func itoa[T int32 | uint32 | int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func count(ok bool, v uint64) string {
	if !ok {
		return "-"
	}
	return strconv.FormatUint(v, 10)
}

func joinInts(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return cmp.Or(strings.Join(s, ","), "-")
}

func percent(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

func extras(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + strconv.FormatUint(m[k], 10)
	}
	return cmp.Or(strings.Join(keys, " "), "-")
}

// fmtNs prints nanoseconds with three significant digits: 850ns, 12.3µs, 1.20ms.
func fmtNs(ns uint64) string {
	if ns < 1000 {
		return strconv.FormatUint(ns, 10) + "ns"
	}
	x := float64(ns)
	for _, unit := range []string{"µs", "ms", "s"} {
		x /= 1000
		if x < 999.5 || unit == "s" {
			return sig3(x) + unit
		}
	}
	panic("unreachable")
}

// sig3 is x (≥ 1) to three significant digits, without an exponent.
func sig3(x float64) string {
	switch {
	case x < 9.995:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 99.95:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
}

func fmtUnit(v uint64, unit string) string {
	switch unit {
	case "ns":
		return fmtNs(v)
	case "":
		return strconv.FormatUint(v, 10)
	case "bytes":
		return strconv.FormatUint(v, 10) + "B"
	default:
		return strconv.FormatUint(v, 10) + " " + unit
	}
}
