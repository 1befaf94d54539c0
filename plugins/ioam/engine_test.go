package ioam_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/metrics"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/plugins/ioam"
	"github.com/linerate/linerate/plugins/ioam/api"

	_ "github.com/linerate/linerate/plugins/builtin" // generator, forward, link, sink
	_ "github.com/linerate/linerate/ports/mem"
)

// pathConfig is an IOAM domain in one engine on mem ports: the generator's
// packets get a trace inline (they are linerate's own), cross a transit,
// the mem wire, another transit, and the decap, which exports records.
func pathConfig(exportFile string) string {
	return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 8192
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"

[[pipelines]]
name = "source"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
src = "2001:db8:1::1"
dst = "2001:db8:2::1"
sizes = [200]
count = 3000
[[pipelines.stages]]
kind = "ioam.encap"
name = "encap"
node_id = 1
timestamp = "posix"
mode = "auto"
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
namespaces = [ { id = 7 } ]
[[pipelines.stages.profiles]]
trace = { namespace = 7, type = "0xF00000", hops = 4 }
[[pipelines.stages]]
kind = "ioam.transit"
name = "transit-a"
node_id = 2
timestamp = "posix"
egress_port = "m0"
namespaces = [ { id = 7 } ]
[[pipelines.stages]]
kind = "forward"
port = "m0"

[[pipelines]]
name = "sink"
lcores = [0]
rx = ["m1"]
[[pipelines.stages]]
kind = "ioam.transit"
name = "transit-b"
node_id = 3
timestamp = "posix"
namespaces = [ { id = 7 } ]
[[pipelines.stages]]
kind = "ioam.decap"
name = "decap"
node_id = 4
timestamp = "posix"
export = true
export_file = %q
namespaces = [ { id = 7 } ]
[[pipelines.stages]]
kind = "sink"
name = "sink"
`, exportFile)
}

// Through an engine: records as JSON lines in a file, per-hop delay
// histograms in the Prometheus exposition, and the control API's stream.
func TestEngineExport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ioam.jsonl")
	e := enginetest.Start(t, pathConfig(path), appliance.Options{Manual: true})

	// The control API on a unix socket.
	cl := api.NewIoamClient(enginetest.Dial(t, e))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ns, err := cl.ListIoamNamespaces(ctx, &api.ListIoamNamespacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Stages) != 4 || ns.Stages[0].Namespaces[0].Id != 7 || ns.Stages[0].Namespaces[0].NodeId != 1 {
		t.Errorf("namespaces: %v", ns.Stages)
	}
	seven := uint32(7)
	stream, err := cl.StreamIoamRecords(ctx, &api.StreamIoamRecordsRequest{Namespace: &seven})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *api.IoamRecord, 1)
	go func() {
		r, err := stream.Recv()
		if err != nil {
			t.Errorf("stream: %v", err)
			close(got)
			return
		}
		got <- r
	}()
	// The stream subscribes on the server's goroutines, which a loaded
	// machine may run late: step until its first record comes, for up to
	// 20 s (the context's bound) rather than a fixed number of steps.
	var rec *api.IoamRecord
	for i, deadline := 0, time.Now().Add(20*time.Second); rec == nil && time.Now().Before(deadline); i++ {
		e.Step()
		select {
		case rec = <-got:
		default:
			if i%1000 == 999 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	if rec == nil {
		t.Fatal("no record on the stream")
	}
	if rec.Stage != "decap" || rec.Trace == nil || len(rec.Trace.Hops) != 4 || rec.Trace.Namespace != 7 {
		t.Fatalf("streamed record %v", rec)
	}
	for i, h := range rec.Trace.Hops {
		if h.NodeId != uint64(i+1) {
			t.Errorf("hop %d: node id %d", i, h.NodeId)
		}
	}

	// Run until every packet has crossed.
	for i := 0; enginetest.Counter(e.Snapshot(), "sink", "received") < 3000; i++ {
		for range 256 {
			e.Step()
		}
		if i > 100000 {
			t.Fatalf("the sink received %d of 3000", enginetest.Counter(e.Snapshot(), "sink", "received"))
		}
	}

	// Prometheus: the decap's delay histograms.
	hs := httptest.NewServer(metrics.Handler(e))
	defer hs.Close()
	resp, err := hs.Client().Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"linerate_stage_hop1_delay_seconds_bucket", "linerate_stage_hop3_delay_seconds_count", "linerate_stage_e2e_delay_seconds_sum"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("metrics lack %s", m)
		}
	}

	e.Stop()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := enginetest.Counter(e.Snapshot(), "decap", "decapsulated"); n != 3000 {
		t.Errorf("decapsulated %d of 3000", n)
	}
	recs := readRecords(t, path)
	lines := len(recs)
	for i, j := range recs {
		if j.Role != "decap" || j.Stage != "decap" || j.Trace == nil || len(j.Trace.Hops) != 4 || j.Dst != "2001:db8:2::1" {
			t.Fatalf("line %d: %+v", i+1, j)
		}
	}
	exported := enginetest.Counter(e.Snapshot(), "decap", "exported")
	if uint64(lines) != exported || lines+int(enginetest.Counter(e.Snapshot(), "decap", "export_dropped")) != 3000 {
		t.Errorf("%d lines, exported %d, dropped %d", lines, exported, enginetest.Counter(e.Snapshot(), "decap", "export_dropped"))
	}
}

// Transit delay (trace bit 4) is the time from rx to tx: a node's stage writes
// the delay so far, and transmit writes it again from the packet's tx time.
// Here a 3 ms link stands between transit-a's stage and the port, so transit-a
// reports 3 ms. A packet carries one such field, the last node stage's: the
// encapsulating node, in the same engine before transit-a, keeps its delay up
// to its stage, as do transit-b and the decapsulating node, which no link
// follows.
func TestTransitDelayAtTransmit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ioam.jsonl")
	cfg := pathConfig(path)
	for _, r := range [][2]string{
		{`trace = { namespace = 7, type = "0xF00000", hops = 4 }`, `trace = { namespace = 7, type = "0x880000", hops = 4 }`},
		{"count = 3000", "count = 200\nrate = \"20000pps\""},
		{"[[pipelines.stages]]\nkind = \"forward\"\nport = \"m0\"", "[[pipelines.stages]]\nkind = \"link\"\ndelay = \"3ms\"\n[[pipelines.stages]]\nkind = \"forward\"\nport = \"m0\""},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("pathConfig has no %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	clk := clock.NewSim(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e := enginetest.Start(t, cfg, appliance.Options{Manual: true, Clock: clk})
	const step = 5 * time.Microsecond
	enginetest.Run(e, clk, 50*time.Millisecond, step)
	e.Stop()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, path)
	for _, j := range recs {
		if j.Trace == nil || len(j.Trace.Hops) != 4 {
			t.Fatalf("record %+v", j)
		}
		for i, h := range j.Trace.Hops {
			if h.TransitDelay == nil {
				t.Fatalf("hop %d has no transit delay: %+v", i+1, j)
			}
			d := time.Duration(*h.TransitDelay)
			if i == 1 { // transit-a: up to the port, past the link
				if d < 3*time.Millisecond || d > 3*time.Millisecond+4*step {
					t.Fatalf("hop %d: transit delay %v, want 3ms", i+1, d)
				}
			} else if d > 4*step {
				t.Fatalf("hop %d: transit delay %v, want about 0", i+1, d)
			}
		}
	}
	if len(recs) != 200 {
		t.Errorf("%d records, want 200", len(recs))
	}
}

// readRecords reads an export file's JSON lines.
func readRecords(t *testing.T, path string) []ioam.RecordJSON {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ioam.RecordJSON
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var j ioam.RecordJSON
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("line %d: %v: %s", len(out)+1, err, sc.Text())
		}
		out = append(out, j)
	}
	return out
}
