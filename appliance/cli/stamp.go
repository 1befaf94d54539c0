package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/plugins/stamp"
	"github.com/linerate/linerate/plugins/stamp/api"
)

const stampUsage = `Usage: linerate stamp <command> [flags] [arguments]

Talk to a running appliance's STAMP stages (plugins/stamp, docs/stamp.md).

Commands:
  list                       the sessions, sender and reflector, config and API
  create sender  --ssid N --reflector ADDR [--segments A,B] [--interval D] …
  create reflector --ssid N [--stateful] [--return-path A,B] …
  start   [--reflector] SSID start a session (a sender's sequence restarts at 0)
  stop    [--reflector] SSID
  destroy [--reflector] SSID
  results SSID               drain the records and show the metrics: delay per
                             direction, jitter, loss (--records lists them)
  watch   [SSID]             stream records and metrics until interrupted

Run 'linerate stamp <command> --help' for its flags.
`

func cmdStamp(args []string) int { return runStamp(args, os.Stdout, os.Stderr) }

// stampClient is what the stamp commands share: flags, a connection, output.
type stampClient struct {
	name           string
	fs             *flag.FlagSet
	addr           *string
	timeout        *time.Duration
	asJSON, wide   *bool
	caFile         *string
	certFile       *string
	keyFile        *string
	stdout, stderr io.Writer
}

func newStampClient(name string, stdout, stderr io.Writer) *stampClient {
	c := &stampClient{name: name, fs: flag.NewFlagSet("stamp "+name, flag.ContinueOnError), stdout: stdout, stderr: stderr}
	c.fs.SetOutput(stderr)
	c.addr = c.fs.String("control", defaultControl(), "control API `address`: unix:/path or host:port")
	c.timeout = c.fs.Duration("timeout", 5*time.Second, "give up after this long (not for watch)")
	c.asJSON = c.fs.Bool("json", false, "print replies as JSON")
	c.wide = c.fs.Bool("wide", false, "print each table row on one line, however wide")
	c.caFile = c.fs.String("tls-ca", "", "CA `file` that signed the server's certificate (turns TLS on)")
	c.certFile = c.fs.String("tls-cert", "", "client certificate `file`, for mTLS")
	c.keyFile = c.fs.String("tls-key", "", "client key `file`, for mTLS")
	return c
}

func (c *stampClient) usage(w io.Writer, synopsis string) {
	fmt.Fprintf(w, "Usage: linerate stamp %s\n\nFlags:\n", synopsis)
	c.fs.SetOutput(w)
	c.fs.PrintDefaults()
	c.fs.SetOutput(c.stderr)
}

// parse reads flags that may come before and after the arguments.
func (c *stampClient) parse(args []string, synopsis string) ([]string, int, bool) {
	c.fs.Usage = func() { c.usage(c.stderr, synopsis) }
	if wantsHelp(args) {
		c.usage(c.stdout, synopsis)
		return nil, 0, false
	}
	rest, err := parseFlags(c.fs, args)
	if err != nil {
		return nil, exitOf(err), false
	}
	return rest, 0, true
}

func (c *stampClient) layout() table.Options { return table.Options{Wide: *c.wide} }

func (c *stampClient) failf(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "linerate stamp %s: "+format+"\n", append([]any{c.name}, a...)...)
	return 1
}

func (c *stampClient) rpcErr(err error) int {
	if s, ok := status.FromError(err); ok {
		if s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded {
			return c.failf("cannot reach the appliance at %s (is it running?): %s", *c.addr, s.Message())
		}
		return c.failf("%s", s.Message())
	}
	return c.failf("%v", err)
}

func (c *stampClient) dial() (api.StampClient, *grpc.ClientConn, error) {
	cc, err := dialControl(*c.addr, *c.caFile, *c.certFile, *c.keyFile)
	if err != nil {
		return nil, nil, err
	}
	return api.NewStampClient(cc), cc, nil
}

// call is dial with a context for one call's deadline; release closes both.
func (c *stampClient) call() (cl api.StampClient, ctx context.Context, release func(), err error) {
	cl, cc, err := c.dial()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *c.timeout)
	return cl, ctx, func() { cancel(); cc.Close() }, nil
}

// parseSSID reads the flags and the one argument, an SSID; ok false means
// exit with code.
func (c *stampClient) parseSSID(args []string, synopsis string) (id uint32, code int, ok bool) {
	rest, code, ok := c.parse(args, synopsis)
	if !ok {
		return 0, code, false
	}
	if len(rest) != 1 {
		c.fs.Usage()
		return 0, 2, false
	}
	id, err := parseSSID(rest[0])
	if err != nil {
		return 0, c.failf("%v", err), false
	}
	return id, 0, true
}

func (c *stampClient) printJSON(m proto.Message) {
	b, _ := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: false}.Marshal(m)
	fmt.Fprintln(c.stdout, string(b))
}

func runStamp(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") && !wantsHelp(args[:1]) {
		// Flags before the command: the ones every command has, read on
		// after the command's own arguments.
		c := newStampClient("", stdout, stderr)
		c.fs.Usage = func() { fmt.Fprint(stderr, stampUsage) }
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		lead := args[:len(args)-c.fs.NArg()]
		args = append(slices.Clone(c.fs.Args()), lead...)
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, stampUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, stampUsage)
		return 0
	case "list":
		return stampList(args[1:], stdout, stderr)
	case "create":
		return stampCreate(args[1:], stdout, stderr)
	case "start", "stop", "destroy":
		return stampOp(args[0], args[1:], stdout, stderr)
	case "results":
		return stampResults(args[1:], stdout, stderr)
	case "watch":
		return stampWatch(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "linerate stamp: unknown command %q\n\n%s", args[0], stampUsage)
	return 2
}

func printSessions(w io.Writer, o table.Options, ss []*api.StampSessionInfo) {
	cols := table.Cols("ROLE", "SSID", "STAGE", "STATE", "FROM", "SENT/RECEIVED", "SESSION")
	cols[6].Wrap = true
	t := table.New(cols...)
	for _, s := range ss {
		role, count := "sender", strconv.FormatUint(s.Sent, 10)
		if s.Role == api.StampRole_STAMP_ROLE_REFLECTOR {
			role, count = "reflector", fmt.Sprintf("%d/%d", s.Received, s.Replied)
		}
		state := "stopped"
		if s.Running {
			state = "running"
		}
		from := "api"
		if s.FromConfig {
			from = "config"
		}
		t.Add(role, itoa(s.Ssid), s.Stage, state, from, count, s.Description)
	}
	t.Write(w, o)
}

func stampList(args []string, stdout, stderr io.Writer) int {
	c := newStampClient("list", stdout, stderr)
	rest, code, ok := c.parse(args, "list [flags]")
	if !ok {
		return code
	}
	if len(rest) > 0 {
		return c.failf("unexpected argument %q", rest[0])
	}
	cl, ctx, release, err := c.call()
	if err != nil {
		return c.failf("%v", err)
	}
	defer release()
	r, err := cl.ListStampSessions(ctx, &api.ListStampSessionsRequest{})
	if err != nil {
		return c.rpcErr(err)
	}
	if *c.asJSON {
		c.printJSON(r)
		return 0
	}
	printSessions(stdout, c.layout(), r.Sessions)
	return 0
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

const stampCreateUsage = `Usage: linerate stamp create <command> [flags]

Create a STAMP session on a running appliance's stamp stage.

Commands:
  sender      a Session-Sender: --ssid N, and where and how to send
  reflector   a Session-Reflector's session: --ssid N, stateful or not

Run 'linerate stamp create <command> --help' for the flags of each.
`

func stampCreate(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "sender" && args[0] != "reflector" && !wantsHelp(args[:1])) {
		fmt.Fprint(stderr, stampCreateUsage)
		return 2
	}
	if wantsHelp(args[:1]) {
		fmt.Fprint(stdout, stampCreateUsage)
		return 0
	}
	role := args[0]
	c := newStampClient("create "+role, stdout, stderr)
	fs := c.fs
	ssid := fs.Uint("ssid", 0, "session id, 1..65535 (required)")
	stage := fs.String("stage", "", "the stamp."+role+" stage (default: the only one)")
	start := fs.Bool("start", false, "start the session at once")
	key := fs.String("key", "", "HMAC key: a file `name` in the stage's key_dir")
	auth := fs.Bool("auth", false, "authenticated mode (needs --key)")
	ts := fs.String("timestamp", "", "timestamp format: ntp or ptp (reflector: or mirror)")
	returnPath := fs.String("return-path", "", "SRv6 return path, comma-separated `segments` in travel order")
	var sender *api.StampSenderSession
	var refl *api.StampReflectorSession
	var (
		src, reflector, segments, tlvs            *string
		interval, duration                        *time.Duration
		count                                     *uint64
		hmacTLV, statefulRefl, statefulSess       *bool
		cosDSCP, padding, srcPort, reflPort, dscp *int
		pinned, source                            *string
	)
	if role == "sender" {
		src = fs.String("src", "", "source `address` (default: the stage's src)")
		reflector = fs.String("reflector", "", "the reflector's `address` (default: the last segment)")
		segments = fs.String("segments", "", "forward SID list, comma-separated, in travel order")
		interval = fs.Duration("interval", 0, "time between test packets (default: the stage's)")
		count = fs.Uint64("count", 0, "stop after this many packets")
		duration = fs.Duration("duration", 0, "stop after this long")
		tlvs = fs.String("tlvs", "", "TLVs, comma-separated, of timestamp_info, location,\ndirect_measurement, follow_up_telemetry, destination_node_address, access_report")
		hmacTLV = fs.Bool("hmac-tlv", false, "add an HMAC TLV (needs --key)")
		cosDSCP = fs.Int("cos-dscp", -1, "add a Class of Service TLV asking for this DSCP")
		padding = fs.Int("padding", 0, "add an Extra Padding TLV of this many octets")
		statefulRefl = fs.Bool("stateful-reflector", false, "the reflector keeps its own sequence: loss splits by direction")
		srcPort = fs.Int("src-port", 0, "sender UDP port (default: the stage's)")
		reflPort = fs.Int("reflector-port", 0, "reflector UDP port (default 862)")
		dscp = fs.Int("dscp", 0, "DSCP of the test packets")
	} else {
		statefulSess = fs.Bool("stateful", false, "keep the reflector's own sequence")
		pinned = fs.String("sender", "", "answer only this sender `address`")
		source = fs.String("source", "", "reply source `address` (default: where the test packet came to)")
	}
	rest, code, ok := c.parse(args[1:], "create "+role+" [flags]")
	if !ok {
		return code
	}
	if len(rest) > 0 {
		return c.failf("unexpected argument %q", rest[0])
	}
	if *ssid == 0 || *ssid > 65535 {
		return c.failf("--ssid 1..65535 is required")
	}
	req := &api.CreateStampSessionRequest{Start: *start}
	if role == "sender" {
		sender = &api.StampSenderSession{Ssid: uint32(*ssid), Stage: *stage, Src: *src, Reflector: *reflector,
			Segments: splitList(*segments), IntervalNs: uint64(*interval), Count: *count, DurationNs: uint64(*duration),
			Timestamp: *ts, Authenticated: *auth, Key: *key, HmacTlv: *hmacTLV, Tlvs: splitList(*tlvs),
			ReturnPath: splitList(*returnPath), Padding: uint32(max(*padding, 0)), StatefulReflector: *statefulRefl,
			SrcPort: uint32(max(*srcPort, 0)), ReflectorPort: uint32(max(*reflPort, 0)), Dscp: uint32(max(*dscp, 0))}
		if *cosDSCP >= 0 {
			v := uint32(*cosDSCP)
			sender.CosDscp = &v
		}
		req.Session = &api.CreateStampSessionRequest_Sender{Sender: sender}
	} else {
		refl = &api.StampReflectorSession{Ssid: uint32(*ssid), Stage: *stage, Stateful: *statefulSess, Sender: *pinned,
			Source: *source, ReturnPath: splitList(*returnPath), Timestamp: *ts, Authenticated: *auth, Key: *key}
		req.Session = &api.CreateStampSessionRequest_Reflector{Reflector: refl}
	}
	cl, ctx, release, err := c.call()
	if err != nil {
		return c.failf("%v", err)
	}
	defer release()
	r, err := cl.CreateStampSession(ctx, req)
	if err != nil {
		return c.rpcErr(err)
	}
	if *c.asJSON {
		c.printJSON(r)
		return 0
	}
	printSessions(stdout, c.layout(), []*api.StampSessionInfo{r.Session})
	return 0
}

func parseSSID(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("SSID %q: 1..65535", s)
	}
	return uint32(v), nil
}

func stampOp(op string, args []string, stdout, stderr io.Writer) int {
	c := newStampClient(op, stdout, stderr)
	isRefl := c.fs.Bool("reflector", false, "the reflector session of that SSID (default: the sender's)")
	id, code, ok := c.parseSSID(args, op+" [--reflector] SSID")
	if !ok {
		return code
	}
	ref := &api.StampSessionRef{Role: api.StampRole_STAMP_ROLE_SENDER, Ssid: id}
	if *isRefl {
		ref.Role = api.StampRole_STAMP_ROLE_REFLECTOR
	}
	cl, ctx, release, err := c.call()
	if err != nil {
		return c.failf("%v", err)
	}
	defer release()
	var r *api.StampSessionReply
	switch op {
	case "start":
		r, err = cl.StartStampSession(ctx, ref)
	case "stop":
		r, err = cl.StopStampSession(ctx, ref)
	default:
		r, err = cl.DestroyStampSession(ctx, ref)
	}
	if err != nil {
		return c.rpcErr(err)
	}
	if *c.asJSON {
		c.printJSON(r)
		return 0
	}
	past := map[string]string{"start": "started", "stop": "stopped", "destroy": "destroyed"}[op]
	fmt.Fprintf(stdout, "%s: %s\n", past, r.Session.GetDescription())
	return 0
}

// printRecords lists records, one line each.
func printRecords(w io.Writer, o table.Options, recs []*api.StampRecord, header bool) {
	cols := table.Cols("SSID", "SEQ", "RSEQ", "RTT", "FORWARD", "BACKWARD", "TTL", "SYNC", "FLAGS")
	for i := range cols {
		cols[i].Right = true
	}
	t := table.New(cols...)
	for _, r := range recs {
		sync := "yes"
		if !r.Synchronized {
			sync = "no"
		}
		t.Add(itoa(r.Ssid), itoa(r.Seq), itoa(r.ReflectorSeq), stamp.Dur(r.RttNs), stamp.Dur(r.ForwardNs),
			stamp.Dur(r.BackwardNs), itoa(r.SenderTtl), sync, fmt.Sprintf("%#x", r.Flags))
	}
	var b strings.Builder
	t.Write(&b, o)
	out := b.String()
	if !header {
		// The names still size the columns, which line up under the
		// header printed before.
		_, out, _ = strings.Cut(out, "\n")
	}
	io.WriteString(w, out)
}

func stampResults(args []string, stdout, stderr io.Writer) int {
	c := newStampClient("results", stdout, stderr)
	records := c.fs.Bool("records", false, "list the records drained")
	maxRecs := c.fs.Uint("max", 0, "drain at most this many records (0: all that wait)")
	metricsOnly := c.fs.Bool("metrics-only", false, "leave the records in the FIFO")
	id, code, ok := c.parseSSID(args, "results [flags] SSID")
	if !ok {
		return code
	}
	cl, ctx, release, err := c.call()
	if err != nil {
		return c.failf("%v", err)
	}
	defer release()
	r, err := cl.GetStampSessionResults(ctx, &api.GetStampSessionResultsRequest{Ssid: id, MaxRecords: uint32(*maxRecs), MetricsOnly: *metricsOnly})
	if err != nil {
		return c.rpcErr(err)
	}
	if *c.asJSON {
		c.printJSON(r)
		return 0
	}
	m := stamp.MetricsFromProto(r.Metrics)
	stamp.WriteReport(stdout, fmt.Sprintf("STAMP session %d (%d records drained)", id, len(r.Records)), &m, c.layout())
	if *records && len(r.Records) > 0 {
		fmt.Fprintln(stdout)
		printRecords(stdout, c.layout(), r.Records, true)
	}
	return 0
}

func stampWatch(args []string, stdout, stderr io.Writer) int {
	c := newStampClient("watch", stdout, stderr)
	every := c.fs.Duration("interval", time.Second, "how often to print the metrics")
	records := c.fs.Bool("records", true, "print each record")
	forD := c.fs.Duration("for", 0, "stop after this long (0: until interrupted)")
	rest, code, ok := c.parse(args, "watch [flags] [SSID]")
	if !ok {
		return code
	}
	var id uint32
	if len(rest) > 1 {
		c.fs.Usage()
		return 2
	}
	if len(rest) == 1 {
		var err error
		if id, err = parseSSID(rest[0]); err != nil {
			return c.failf("%v", err)
		}
	}
	cl, cc, err := c.dial()
	if err != nil {
		return c.failf("%v", err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if *forD > 0 {
		ctx, cancel = context.WithTimeout(ctx, *forD)
		defer cancel()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	st, err := cl.StreamStampSessionResults(ctx, &api.StreamStampSessionResultsRequest{Ssid: id,
		MetricsIntervalMs: uint32(every.Milliseconds()), MetricsOnly: !*records})
	if err != nil {
		return c.rpcErr(err)
	}
	header := true
	for {
		r, err := st.Recv()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled || status.Code(err) == codes.DeadlineExceeded {
				return 0
			}
			return c.rpcErr(err)
		}
		if *c.asJSON {
			b, _ := protojson.Marshal(r)
			fmt.Fprintln(stdout, string(b))
			continue
		}
		if len(r.Records) > 0 {
			printRecords(stdout, c.layout(), r.Records, header)
			header = false
		}
		if r.Metrics != nil {
			m := stamp.MetricsFromProto(r.Metrics)
			stamp.WriteReport(stdout, fmt.Sprintf("STAMP session %d at %s", r.Ssid, time.Now().Format(time.TimeOnly)), &m, c.layout())
			header = true
		}
	}
}
