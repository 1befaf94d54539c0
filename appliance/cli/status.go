package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/linerate/linerate/appliance/api"
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
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	caFile := fs.String("tls-ca", "", "CA `file` that signed the server's certificate (turns TLS on)")
	certFile := fs.String("tls-cert", "", "client certificate `file`, for mTLS")
	keyFile := fs.String("tls-key", "", "client key `file`, for mTLS")
	fs.Usage = func() { printUsage(stderr, fs) }
	if wantsHelp(args) {
		printUsage(stdout, fs)
		return 0
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "linerate status: unexpected argument %q\n", rest[0])
		fs.Usage()
		return 2
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
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	printStatus(w, *addr, st, stats, *full)
	if statsErr != nil {
		fmt.Fprintf(w, "\nno stats yet: %s\n", status.Convert(statsErr).Message())
	}
	if err := w.Flush(); err != nil {
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

func printStatus(w io.Writer, addr string, st *api.StatusReply, stats *api.StatsReply, full bool) {
	fmt.Fprintf(w, "linerate %s\t%s", st.GetVersion(), stateName(st.GetState()))
	if st.GetStarted() != nil {
		fmt.Fprintf(w, ", up %s since %s", st.GetUptime().AsDuration().Round(time.Second),
			st.GetStarted().AsTime().Local().Format("2006-01-02 15:04:05 MST"))
	}
	fmt.Fprintf(w, "\nconfig\t%s\ncontrol\t%s\n", cmp.Or(st.GetConfigPath(), "(embedded lab)"), addr)

	portStats := map[string]*api.PortStats{}
	for _, p := range stats.GetPorts() {
		portStats[p.Name] = p
	}
	fmt.Fprintln(w, "\nPORT\tDRIVER\tLINK\tMTU\tRXQ\tTXQ\tMAC\tTIMESTAMPS\tRX PACKETS\tTX PACKETS")
	for _, p := range st.GetPorts() {
		ps := portStats[p.Name]
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Name, p.Driver, upDown(p.LinkUp),
			p.Mtu, p.RxQueues, p.TxQueues, cmp.Or(p.Mac, "-"), cmp.Or(p.TimestampSource, "-"),
			count(ps != nil, ps.GetRxPackets()), count(ps != nil, ps.GetTxPackets()))
	}

	fmt.Fprintln(w, "\nPIPELINE\tLCORES\tSTAGES")
	for _, p := range st.GetPipelines() {
		fmt.Fprintf(w, "%s\t%s\t%s\n", p.Name, joinInts(p.Lcores), strings.Join(p.Stages, " → "))
	}

	lcoreStats := map[int32]*api.LcoreStats{}
	for _, l := range stats.GetLcores() {
		lcoreStats[l.Id] = l
	}
	fmt.Fprintln(w, "\nLCORE\tCPU\tPIPELINES\tLOOPS\tBUSY\tPACKETS\tGAP P50\tP90\tP99\tP99.9\tMAX")
	for _, l := range st.GetLcores() {
		fmt.Fprintf(w, "%d\t%s\t%s", l.Id, cpuName(l.Cpu), cmp.Or(strings.Join(l.Pipelines, ","), "-"))
		ls := lcoreStats[l.Id]
		if ls == nil {
			fmt.Fprintln(w, "\t-\t-\t-\t-\t-\t-\t-\t-")
			continue
		}
		fmt.Fprintf(w, "\t%d\t%s\t%d", ls.Loops, percent(ls.BusyLoops, ls.Loops), ls.Packets)
		if g := ls.GetLoopGap(); g.GetCount() > 0 {
			fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\t%s\n", fmtNs(g.P50), fmtNs(g.P90), fmtNs(g.P99), fmtNs(g.P999), fmtNs(g.Max))
		} else {
			fmt.Fprintln(w, "\t-\t-\t-\t-\t-")
		}
	}

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
		fmt.Fprintln(w, "\nDROP REASON\tPACKETS")
		for _, d := range drops {
			fmt.Fprintf(w, "%s\t%d\n", d.Reason, d.Count)
		}
	}
	if full {
		printStats(w, stats)
	}
}

// printStats is --stats: every counter.
func printStats(w io.Writer, s *api.StatsReply) {
	fmt.Fprintln(w, "\nPORT\tRX PACKETS\tRX BYTES\tTX PACKETS\tTX BYTES\tRX DROPPED\tTX DROPPED\tRX ERRORS\tDRIVER COUNTERS")
	for _, p := range s.GetPorts() {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Name, p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes,
			p.RxDropped, p.TxDropped, p.RxErrors, extras(p.Extra))
	}

	fmt.Fprintln(w, "\nPIPELINE\tSTAGE\tKIND\tLCORE\tPACKETS\tCOUNTERS\tDROPS")
	for _, st := range s.GetStages() {
		var cs, ds []string
		for _, c := range st.Counters {
			cs = append(cs, c.Name+"="+strconv.FormatUint(c.Value, 10))
		}
		for _, d := range st.Drops {
			ds = append(ds, d.Reason+"="+strconv.FormatUint(d.Count, 10))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cmp.Or(st.Pipeline, "-"), st.Name, st.Kind, cpuName(st.Lcore),
			st.Packets, cmp.Or(strings.Join(cs, " "), "-"), cmp.Or(strings.Join(ds, " "), "-"))
	}

	fmt.Fprintln(w, "\nPOOL\tSIZE\tIN USE\tALLOC FAILURES\tCOPIES")
	for _, p := range s.GetPools() {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", p.Name, p.Size, p.InUse, p.AllocFailures, p.Copies)
	}

	if len(s.GetHistograms()) > 0 {
		fmt.Fprintln(w, "\nHISTOGRAM\tOWNER\tCOUNT\tMEAN\tP50\tP90\tP99\tP99.9\tMAX")
		for _, h := range s.GetHistograms() {
			g := h.GetHistogram()
			f := func(v uint64) string {
				if g.GetCount() == 0 {
					return "-"
				}
				return fmtUnit(v, h.Unit)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.Owner, g.GetCount(),
				f(uint64(g.GetMean()+0.5)), f(g.GetP50()), f(g.GetP90()), f(g.GetP99()), f(g.GetP999()), f(g.GetMax()))
		}
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
