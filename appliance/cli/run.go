package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/metrics"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

func loadConfig(path string) (*config.File, error) {
	if path == "" {
		return config.LoadLab()
	}
	return config.Load(path)
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func cmdRun(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfgPath := fs.String("c", "", "config `file` (default: the embedded lab)")
	duration := fs.Duration("duration", 0, "stop after this long (0: run until interrupted or every finite input is done)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	live := fs.Bool("live", isTerminal(os.Stderr), "print a live stats line every second")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: linerate run [-c FILE] [--duration D]

Runs the pipelines of a config on pinned lcores. Without -c it runs the embedded
lab (see 'linerate config default'). It stops on SIGINT or SIGTERM, after
--duration, or by itself when every finite input (a pcap read once, a generator
with a count) is done; then it drains in-flight packets, frees every buffer and
prints a summary.

Flags:
`)
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(rest) > 0 {
		fmt.Fprintf(fs.Output(), "linerate run: unexpected argument %q (a config file is -c FILE)\n\n", rest[0])
		fs.Usage()
		return 2
	}
	log, err := newLogger(*logLevel)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	eng, err := appliance.New(cfg, appliance.Options{Log: log, TuneRuntime: true, Version: versionString()})
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

	var srv *control.Server
	if addr := controlAddr(cfg); addr != "" {
		srv = control.NewServer(eng, log)
		eng.RegisterServices(srv.GRPC())
		go func() {
			if err := srv.Serve(addr); err != nil {
				log.Warn("control API not served", "listen", addr, "err", err)
			}
		}()
	}
	if cfg.Metrics.Listen != "" {
		hs, err := metrics.Serve(cfg.Metrics.Listen, metrics.Handler(eng, plugins.Collectors(eng)...))
		if err != nil {
			eng.Stop()
			_ = eng.Close()
			return fail("metrics: %v", err)
		}
		defer hs.Close()
		log.Info("metrics", "listen", cfg.Metrics.Listen)
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
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
			go eng.Stop()
			break loop
		case <-timeout:
			go eng.Stop()
			break loop
		case <-eng.Done():
			break loop
		case <-tick.C:
			if *live {
				fmt.Fprintf(os.Stderr, "\r%s", meter.line(eng.Snapshot()))
			}
		}
	}
	select {
	case <-eng.Done():
	case s := <-sigs:
		log.Warn("second signal: exiting without draining", "signal", s.String())
		return 130
	}
	if *live {
		fmt.Fprintln(os.Stderr)
	}
	if srv != nil {
		srv.Stop()
	}
	snap := eng.Snapshot()
	printSummary(os.Stdout, snap, meter)
	if err := eng.Close(); err != nil {
		return fail("%v", err)
	}
	return 0
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

// printSummary prints per-port and per-stage tables with drops by reason, then
// the lab's figures: throughput, loss and latency percentiles from the sinks.
func printSummary(w io.Writer, s *stats.Snapshot, m *meter) {
	secs := s.Uptime.Seconds()
	if secs <= 0 {
		secs = 1
	}
	fmt.Fprintf(w, "\nlinerate ran for %s\n\n", s.Uptime.Truncate(time.Millisecond))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "port\tdriver\trx packets\trx bytes\ttx packets\ttx bytes\trx dropped\ttx dropped\t")
	for _, p := range s.Ports {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", p.Name, p.Driver, p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes, p.RxDropped, p.TxDropped)
	}
	tw.Flush()
	_, _, txp, txb := portTotals(s)
	fmt.Fprintf(w, "\nrate: %.3f Mpps, %.3f Gbit/s transmitted (all ports, over %s)\n", float64(txp)/secs/1e6,
		float64(txb)*8/secs/1e9, s.Uptime.Truncate(time.Millisecond))
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "pipeline\tstage\tkind\tlcore\tpackets\tcounters\tdrops")
	for _, st := range mergeStages(s.Stages) {
		var cs []string
		for _, c := range st.Counters {
			if c.Value > 0 {
				cs = append(cs, fmt.Sprintf("%s=%d", c.Name, c.Value))
			}
		}
		var ds []string
		for _, d := range st.Drops {
			ds = append(ds, fmt.Sprintf("%s=%d", d.Reason, d.Count))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", st.Pipeline, st.Name, st.Kind, st.Lcore, st.Packets,
			strings.Join(cs, " "), strings.Join(ds, " "))
	}
	tw.Flush()
	if len(s.Drops) > 0 {
		fmt.Fprintln(w, "\ndrops by reason:")
		for _, d := range s.Drops {
			fmt.Fprintf(w, "  %-24s %d\n", d.Reason, d.Count)
		}
	}
	printLab(w, s, secs)
}

// mergeStages sums the instances of a stage that runs on several lcores.
func mergeStages(in []stats.StageSnapshot) []stats.StageSnapshot {
	type key struct{ p, n string }
	idx := map[key]int{}
	var out []stats.StageSnapshot
	for _, st := range in {
		k := key{st.Pipeline, st.Name}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			cp := st
			cp.Counters = append([]stats.CounterValue(nil), st.Counters...)
			cp.Drops = append([]stats.DropCount(nil), st.Drops...)
			out = append(out, cp)
			continue
		}
		o := &out[i]
		o.Packets += st.Packets
		for _, c := range st.Counters {
			found := false
			for j := range o.Counters {
				if o.Counters[j].Name == c.Name {
					o.Counters[j].Value += c.Value
					found = true
				}
			}
			if !found {
				o.Counters = append(o.Counters, c)
			}
		}
		for _, d := range st.Drops {
			found := false
			for j := range o.Drops {
				if o.Drops[j].Reason == d.Reason {
					o.Drops[j].Count += d.Count
					found = true
				}
			}
			if !found {
				o.Drops = append(o.Drops, d)
			}
		}
	}
	return out
}

func counter(st stats.StageSnapshot, name string) uint64 {
	for _, c := range st.Counters {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// printLab reports what generators sent and sinks received, then the
// percentiles of every histogram: the sinks' latency, the IOAM decap's
// per-hop and end-to-end delays, whether the config has a sink or not.
func printLab(w io.Writer, s *stats.Snapshot, secs float64) {
	printSinks(w, s, secs)
	printHistograms(w, s)
}

// printSinks reports what generators sent and sinks received.
func printSinks(w io.Writer, s *stats.Snapshot, secs float64) {
	var sent, generators uint64
	type sinkRow struct {
		name                  string
		recv, bytes, lost, re uint64
	}
	var sinks []sinkRow
	for _, st := range mergeStages(s.Stages) {
		switch st.Kind {
		case "generator":
			sent += counter(st, "sent")
			generators++
		case "sink":
			sinks = append(sinks, sinkRow{st.Pipeline + "/" + st.Name, counter(st, "received"), counter(st, "received_bytes"),
				counter(st, "lost"), counter(st, "reordered")})
		}
	}
	if len(sinks) == 0 {
		return
	}
	fmt.Fprintf(w, "\nlab: %d packets generated\n", sent)
	for _, k := range sinks {
		loss := 0.0
		switch {
		case generators > 1 && k.recv+k.lost > 0:
			// Several paths, each with its own generator: a sink's loss is
			// its own sequence gaps.
			loss = 100 * float64(k.lost) / float64(k.recv+k.lost)
		case sent > 0:
			loss = 100 * (1 - float64(k.recv)/float64(sent))
		}
		fmt.Fprintf(w, "  sink %-20s received %d (%.3f Mpps, %.3f Gbit/s)  loss %.3f%% (sequence gaps %d, reordered %d)\n",
			k.name, k.recv, float64(k.recv)/secs/1e6, float64(k.bytes)*8/secs/1e9, loss, k.lost, k.re)
	}
}

// printHistograms prints the percentiles of each stage histogram that
// recorded anything, the instances of a stage merged.
func printHistograms(w io.Writer, s *stats.Snapshot) {
	hists := map[string]*stats.HistSnapshot{}
	var names []string
	for _, h := range s.Histogram {
		key := h.Owner + " " + h.Name
		if hists[key] == nil {
			hists[key] = stats.NewHistSnapshot()
			names = append(names, key)
		}
		hists[key].Add(h.Hist)
	}
	sort.Strings(names)
	header := false
	for _, n := range names {
		h := hists[n]
		if h.Count == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\npercentiles:")
			header = true
		}
		fmt.Fprintf(w, "  %-34s n=%d  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", n, h.Count,
			dur(h.Quantile(0.5)), dur(h.Quantile(0.9)), dur(h.Quantile(0.99)), dur(h.Quantile(0.999)), dur(h.Max))
	}
}

func dur(ns uint64) string { return time.Duration(ns).Round(100 * time.Nanosecond).String() }

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
Exits 0 when the config is good.

Flags:
`)
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *cfgPath == "" && len(rest) == 1 {
		*cfgPath, rest = rest[0], nil
	}
	if *cfgPath == "" || len(rest) > 0 {
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := appliance.New(cfg, appliance.Options{Log: quiet, DryRun: true, Offline: *offline})
	if err != nil {
		return fail("%v", err)
	}
	warnings := eng.Warnings()
	_ = eng.Close()
	for _, w := range warnings {
		fmt.Fprintf(os.Stderr, "linerate: warning: %s\n", w)
	}
	fmt.Printf("%s: ok\n", *cfgPath)
	return 0
}

func cmdConfig(args []string) int {
	if len(args) == 1 && args[0] == "default" {
		os.Stdout.Write(config.Lab())
		return 0
	}
	fmt.Fprintf(os.Stderr, `Usage: linerate config default

Prints the embedded lab config: what 'linerate run' runs without -c, and a
starting point for your own.
`)
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		return 0
	}
	return 2
}

func cmdStages(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "Usage: linerate stages\n\nLists the stage kinds this binary knows; the READMEs of plugins/builtin, plugins/route, plugins/ioam, plugins/stamp and plugins/rlnc give their keys.\n")
		if args[0] == "--help" || args[0] == "-h" {
			return 0
		}
		return 2
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	for _, k := range plugins.Kinds() {
		fmt.Fprintf(tw, "%s\t%s\n", k.Name, k.Summary)
	}
	tw.Flush()
	return 0
}
