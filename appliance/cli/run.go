package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/appliance/ipfix"
	"github.com/linerate/linerate/appliance/metrics"
	"github.com/linerate/linerate/appliance/otlp"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/ports"
	"github.com/linerate/linerate/tester"
)

func loadConfig(path string) (*config.File, error) {
	if path == "" {
		return config.LoadLab()
	}
	return config.Load(path)
}

func cmdRun(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfgPath := fs.String("c", "", "config `file` (default: the embedded lab)")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until interrupted or every finite input is done)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (default: the config's [log] level, info)")
	logFormat := fs.String("log-format", "", "text or json (default: the config's [log] format, text)")
	live := fs.Bool("live", isTerminal(os.Stderr), "print a live stats line every second")
	wide := fs.Bool("wide", false, "print each row of the summary's tables on one line, however wide")
	asJSON := fs.Bool("json", false, "print the summary as JSON; what stages print (a STAMP report) goes to stderr")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: linerate run [-c FILE] [--duration D] [--wide | --json]

Runs the pipelines of a config on pinned lcores. Without -c it runs the embedded
lab (see 'linerate config default'). It stops on SIGINT or SIGTERM, after
--duration, or by itself when every finite input (a pcap read once, a generator
with a count) is done; then it drains in-flight packets, frees every buffer and
prints a summary. SIGHUP reads the config file again and gives the stages that
can take it their new tables, dropping nothing; a change that needs a restart
is refused, named in the log, and nothing of it applied.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseOnly(fs, args, " (a config file is -c FILE)"); !ok {
		return code
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	// The live line is stderr's last line: the log and the stages' reports
	// erase it before they write, so that nothing is glued onto it.
	lw := &liveWriter{w: os.Stderr}
	log, err := newLogger(lw, cfg.Log.Format, cfg.Log.Level, onJournal())
	if err != nil {
		return fail("%v", err)
	}
	stdout := os.Stdout
	out, err := stageOutput(lw, *asJSON, summaryAsRecord(cfg.Log.Format, isTerminal(stdout)))
	if err != nil {
		return fail("%v", err)
	}
	// SIGHUP's default is to exit: caught from before the engine starts, one
	// that comes while it does (a reload as soon as the log says running, or
	// systemd's) waits for the loop below.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	eng, err := appliance.New(cfg, appliance.Options{Log: log, TuneRuntime: true, Version: versionString(), Output: out})
	if err != nil {
		return fail("%v", err)
	}
	if err := eng.Start(); err != nil {
		_ = eng.Close()
		return fail("start: %v", err)
	}
	log.Info("running", "config", cfg.Path, "lcores", eng.Lcores())
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}

	d := &daemon{Engine: eng, path: *cfgPath, name: cfg.Path, log: log}
	var srv *control.Server
	if addr := controlAddr(cfg); addr != "" {
		srv = control.NewServer(d, log)
		srv.RegisterServices(control.Host(eng))
		if _, err := srv.Start(addr); err != nil {
			log.Warn("control API not served", "listen", addr, "err", err)
		}
	}
	stopOTLP := func() {}
	otlpCfg, err := otlp.Decode(cfg)
	if err != nil {
		eng.Stop()
		_ = eng.Close()
		return fail("%v", err)
	}
	var reg *prometheus.Registry
	if cfg.Metrics.Listen != "" || otlpCfg != nil {
		reg = metrics.Registry(eng, append(host.Collectors(control.Host(eng)), ipfix.Collector())...)
	}
	if cfg.Metrics.Listen != "" {
		hs, err := metrics.Serve(cfg.Metrics.Listen, metrics.RegistryHandler(reg))
		if err != nil {
			eng.Stop()
			_ = eng.Close()
			return fail("metrics: %v", err)
		}
		defer hs.Close()
		log.Info("metrics", "listen", cfg.Metrics.Listen)
	}
	if otlpCfg != nil {
		x, err := otlp.Start(otlpCfg, reg, versionString())
		if err != nil {
			eng.Stop()
			_ = eng.Close()
			return fail("%v", err)
		}
		// The last export, of the engine's last counts, before it closes.
		stopOTLP = func() {
			if err := x.Shutdown(); err != nil {
				log.Warn("otlp: last export", "err", err)
			}
		}
		log.Info("otlp", "endpoint", otlpCfg.Endpoint, "interval", time.Duration(otlpCfg.Interval))
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	d.ready()
	var timeout <-chan time.Time
	if *duration > 0 {
		timeout = time.After(*duration)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	meter := newMeter(eng.Snapshot())
loop:
	for {
		select {
		case s := <-sigs:
			log.Info("stopping", "signal", s.String())
			notify(log, "STOPPING=1")
			go eng.Stop()
			break loop
		case <-timeout:
			go eng.Stop()
			break loop
		case <-eng.Done():
			break loop
		case <-hup:
			_, _, _ = d.ReloadConfig(false)
		case <-tick.C:
			if *live {
				lw.Live(meter.line(eng.Snapshot()))
			}
		}
	}
	select {
	case <-eng.Done():
	case s := <-sigs:
		log.Warn("second signal: exiting without draining", "signal", s.String())
		return 130
	}
	lw.Clear()
	if srv != nil {
		srv.Stop()
	}
	stopOTLP()
	sum := newSummary(eng.Snapshot())
	switch {
	case *asJSON:
		err = sum.writeJSON(stdout)
	case summaryAsRecord(cfg.Log.Format, isTerminal(stdout)):
		err = logSummary(sum, os.Stderr)
	default:
		err = sum.write(stdout, table.Options{Wide: *wide})
	}
	if err != nil {
		_ = eng.Close()
		return fail("%v", err)
	}
	if err := eng.Close(); err != nil {
		return fail("%v", err)
	}
	return 0
}

// stageOutput is where the stages' reports for standard output go: to
// stderr under --json (stdout is the JSON alone), as one record each where
// the summary is one (under systemd or a JSON log), else to stdout; text
// erases the live line first.
func stageOutput(lw *liveWriter, asJSON, records bool) (plugins.Output, error) {
	switch {
	case asJSON:
		return plugins.Output{Text: lw}, nil
	case records:
		log, err := newLogger(lw, "json", "info", onJournal())
		return plugins.Output{Records: log}, err
	}
	return plugins.Output{Text: liveOther{lw, os.Stdout}}, nil
}

// liveOther writes to w, another stream on the live line's terminal, after
// erasing the live line.
type liveOther struct {
	l *liveWriter
	w io.Writer
}

func (o liveOther) Write(p []byte) (int, error) {
	o.l.mu.Lock()
	defer o.l.mu.Unlock()
	o.l.clear()
	return o.w.Write(p)
}

// summaryAsRecord reports whether the stop summary is one log record rather
// than text: under [log] format = "json", or under systemd (NOTIFY_SOCKET,
// or stdout the journal's stream), where its ~120 lines of text would land
// among the log's records. A terminal gets the text.
func summaryAsRecord(format string, stdoutTerminal bool) bool {
	if stdoutTerminal {
		return false
	}
	return format == "json" || os.Getenv("NOTIFY_SOCKET") != "" || onJournalFile(os.Stdout)
}

// logSummary writes the summary as one JSON log record, msg "summary", its
// fields those of run --json under "summary", where the log goes (w, the
// journal's priority prefix included). It is written whatever the log
// level, as the text summary is.
func logSummary(sum *summary, w io.Writer) error {
	var b bytes.Buffer
	if err := sum.writeJSON(&b); err != nil {
		return err
	}
	log, err := newLogger(w, "json", "info", onJournal())
	if err != nil {
		return err
	}
	log.Info("summary", "summary", json.RawMessage(bytes.TrimSpace(b.Bytes())))
	return nil
}

// notify is sdNotify, logging a failure: systemd then sees no readiness and
// the unit's start times out, which the log explains.
func notify(log *slog.Logger, state string) {
	if err := sdNotify(state); err != nil {
		log.Warn("sd_notify", "state", state, "err", err)
	}
}

// controlAddr is the control API address; an unprivileged user gets a socket in
// their runtime directory instead of /run/linerate.
//
// LINERATE_CONTROL, when set, is the address for every command: where run
// listens, whatever the config says, and where the clients dial by default.
func controlAddr(cfg *config.File) string {
	if addr := os.Getenv("LINERATE_CONTROL"); addr != "" {
		return addr
	}
	return userAddr(cfg.Control.Listen, os.Geteuid(), os.Getenv("XDG_RUNTIME_DIR"))
}

// userAddr is addr for user uid: root keeps /run/linerate, which only root
// may create; anyone else gets a socket in their runtime directory.
func userAddr(addr string, uid int, runtimeDir string) string {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok && uid != 0 && strings.HasPrefix(path, "/run/linerate/") {
		if runtimeDir == "" {
			runtimeDir = os.TempDir()
		}
		return "unix:" + filepath.Join(runtimeDir, fmt.Sprintf("linerate-%d.sock", uid))
	}
	return addr
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// meter turns successive snapshots into rates.
type meter struct {
	start, last *stats.Snapshot
}

func newMeter(s *stats.Snapshot) *meter { return &meter{start: s, last: s} }

func portTotals(s *stats.Snapshot) (rxp, rxb, txp, txb uint64) {
	for _, p := range s.Ports {
		rxp += p.RxPackets
		rxb += p.RxBytes
		txp += p.TxPackets
		txb += p.TxBytes
	}
	return
}

func dropTotal(s *stats.Snapshot) uint64 {
	var n uint64
	for _, d := range s.Drops {
		n += d.Count
	}
	return n
}

func stagePackets(s *stats.Snapshot) uint64 {
	var n uint64
	for _, l := range s.Lcores {
		n += l.Packets
	}
	return n
}

func (m *meter) line(s *stats.Snapshot) string {
	dt := s.Time.Sub(m.last.Time).Seconds()
	if dt <= 0 {
		dt = 1
	}
	_, _, txp, txb := portTotals(s)
	_, _, ltxp, ltxb := portTotals(m.last)
	pps := float64(txp-ltxp) / dt
	gbps := float64(txb-ltxb) * 8 / dt / 1e9
	work := float64(stagePackets(s)-stagePackets(m.last)) / dt
	drops := dropTotal(s) - dropTotal(m.last)
	m.last = s
	return fmt.Sprintf("%8s  tx %s pps  %6.3f Gbit/s  processed %s pps  drops %d/s   ",
		s.Uptime.Truncate(time.Second), human(pps), gbps, human(work), uint64(float64(drops)/dt))
}

func human(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%6.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%6.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%6.2fk", v/1e3)
	}
	return fmt.Sprintf("%7.0f", v)
}

func cmdValidate(args []string) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	cfgPath := fs.String("c", "", "config `file` to check (required)")
	offline := fs.Bool("offline", false, "check the file alone, nothing of this host (for a config meant for another machine)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: linerate validate -c FILE [--offline]

Checks a config without running it: TOML syntax, unknown keys, types and values
(each error names the file, line and key), then builds every stage and checks
every port's keys without opening anything. It also checks that this host has
what the config names (interfaces, capture and key files), unless --offline.
Exits 0 when the config is good. Where this host gives the config less than
it asks (a fallback, a failure, a warning), it points at 'linerate doctor -c'.
A test profile (a file with a [test] table) is checked as 'linerate test -c'
reads it.

Flags:
`)
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		return exitOf(err)
	}
	if *cfgPath == "" && len(rest) == 1 {
		*cfgPath, rest = rest[0], nil
	}
	if *cfgPath == "" || len(rest) > 0 {
		fs.Usage()
		return 2
	}
	if isTestProfile(*cfgPath) {
		// A test profile (a top-level [test] table) has no pipelines:
		// linerate test makes them. It is checked as linerate test loads it.
		if _, err := tester.Load(*cfgPath); err != nil {
			return fail("%v", err)
		}
		fmt.Printf("%s: ok\n", *cfgPath)
		return 0
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var short []ports.Finding // what the host gives less of than asked
	eng, err := appliance.New(cfg, appliance.Options{Log: quiet, DryRun: true, Offline: *offline,
		Plan: func(f ports.Finding) {
			if f.Outcome != ports.AsAsked {
				short = append(short, f)
			}
		}})
	if err != nil {
		code := fail("%v", err)
		pointAtDoctor(*cfgPath, short, nil)
		return code
	}
	warnings := eng.Warnings()
	_ = eng.Close()
	for _, w := range warnings {
		fmt.Fprintf(os.Stderr, "linerate: warning: %s\n", w)
	}
	fmt.Printf("%s: ok\n", *cfgPath)
	pointAtDoctor(*cfgPath, short, warnings)
	return 0
}

// isTestProfile tells whether the file at path is a test profile for
// linerate test: one with a top-level [test] table (tester.Section). A file
// that does not read or parse is not; config.Load then says why.
func isTestProfile(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var top map[string]toml.Primitive
	if _, err := toml.Decode(string(data), &top); err != nil {
		return false
	}
	_, ok := top[tester.Section]
	return ok
}

// pointAtDoctor says, when this host gives the config less than it asks
// (a fallback, a failure, a driver's warning), where to read what and why.
func pointAtDoctor(path string, short []ports.Finding, warnings []string) {
	if len(short) == 0 && len(warnings) == 0 {
		return
	}
	n := map[ports.Outcome]int{}
	for _, f := range short {
		n[f.Outcome]++
	}
	var what []string
	if n[ports.FallsBack] > 0 {
		what = append(what, fmt.Sprintf("%d fall back", n[ports.FallsBack]))
	}
	if n[ports.Fails] > 0 {
		what = append(what, fmt.Sprintf("%d fail", n[ports.Fails]))
	}
	if len(warnings) > 0 {
		what = append(what, fmt.Sprintf("%d warnings", len(warnings)))
	}
	fmt.Fprintf(os.Stderr, "linerate: this host gives the config less than it asks (%s): "+
		"'linerate doctor -c %s' says what and why\n", strings.Join(what, ", "), path)
}

const configUsage = `Usage: linerate config <command>

Prints a config file, a starting point for your own (docs/config.md).

Commands:
  default   the embedded lab: what 'linerate run' runs without -c. It
            generates its own traffic; the package ships it as
            /usr/share/doc/linerate/examples/lab.toml
  service   the service's inert default: no traffic, the control socket and
            metrics on. The package installs it as /etc/linerate/linerate.toml
`

func cmdConfig(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, configUsage)
		return 2
	}
	var text []byte
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Print(configUsage)
		return 0
	case "default":
		text = config.Lab()
	case "service":
		text = config.Service()
	default:
		fmt.Fprintf(os.Stderr, "linerate config: unknown command %q\n\n%s", args[0], configUsage)
		return 2
	}
	if wantsHelp(args[1:]) {
		fmt.Print(configUsage)
		return 0
	}
	if len(args) > 1 {
		fmt.Fprintf(os.Stderr, "linerate config %s: unexpected argument %q\n\n%s", args[0], args[1], configUsage)
		return 2
	}
	os.Stdout.Write(text)
	return 0
}

func cmdStages(args []string) int {
	fs := flag.NewFlagSet("stages", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the kinds as JSON")
	wide := fs.Bool("wide", false, "print each kind on one line, however wide")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: linerate stages [--wide | --json]

Lists the stage kinds this binary knows; the READMEs of plugins/builtin,
plugins/route, plugins/ioam, plugins/stamp and plugins/rlnc give their keys.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseOnly(fs, args, ""); !ok {
		return code
	}
	kinds := plugins.Kinds()
	if *asJSON {
		type kind struct {
			Kind    string `json:"kind"`
			Summary string `json:"summary"`
		}
		out := make([]kind, len(kinds))
		for i, k := range kinds {
			out[i] = kind{k.Name, k.Summary}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Printf("%s\n", b)
		return 0
	}
	t := table.New(table.Column{}, table.Column{Wrap: true})
	for _, k := range kinds {
		t.Add(k.Name, k.Summary)
	}
	t.Write(os.Stdout, table.Options{Wide: *wide})
	return 0
}
