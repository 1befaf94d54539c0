//go:build dpdk

package dpdk

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	_ "github.com/linerate/linerate/plugins/builtin" // forward, generator, sink
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// lcoreIDs records the EAL lcore id each instance of the stage saw on its
// lcore thread, and passes packets on.
var lcoreIDs struct {
	n  atomic.Int32
	id [8]atomic.Int32
}

type lcoreProbe struct{}

func (lcoreProbe) Process(ctx *plugins.Context, b *packet.Burst) {}

func (lcoreProbe) Start(ctx *plugins.Context) error {
	lcoreIDs.id[lcoreIDs.n.Add(1)-1].Store(int32(LcoreID()))
	return nil
}

func init() {
	plugins.Register(plugins.Kind{Name: "dpdktest.lcore", Summary: "test: record the EAL lcore id",
		New: func(s *plugins.Setup) (plugins.Stage, error) { return lcoreProbe{}, s.Config.Decode(&struct{}{}) }})
}

func newEngine(toml string, o appliance.Options) (*appliance.Engine, error) {
	cfg, err := config.Parse("dpdk-test.toml", []byte(toml))
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = quiet
	}
	return appliance.New(cfg, o)
}

func buildEngine(t testing.TB, toml string, o appliance.Options) *appliance.Engine {
	t.Helper()
	e, err := newEngine(toml, o)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	return e
}

func portSnap(s *stats.Snapshot, name string) stats.PortSnapshot {
	for _, p := range s.Ports {
		if p.Name == name {
			return p
		}
	}
	return stats.PortSnapshot{}
}

func nullConfig(a, b string, poolSize int, extraStages string) string {
	return fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[dpdk]
pool_size = %d
pool_cache = 128
[[ports]]
name = "n0"
driver = "dpdk"
device = %q
[[ports]]
name = "n1"
driver = "dpdk"
device = %q
[[pipelines]]
name = "fwd"
rx = ["n0"]
%s
[[pipelines.stages]]
kind = "forward"
port = "n1"
swap_mac = true
`, poolSize, a, b, extraStages)
}

// TestEngineNullLeak forwards millions of packets between two net_null ports
// through the engine on a registered EAL lcore, and checks that every mbuf is
// back in the pool afterwards.
func TestEngineNullLeak(t *testing.T) {
	requireEAL(t)
	const poolSize = 4095
	lcoreIDs.n.Store(0)
	e := buildEngine(t, nullConfig(vdev("net_null"), vdev("net_null"), poolSize, `[[pipelines.stages]]
kind = "dpdktest.lcore"`), appliance.Options{})
	n0, _ := e.Port("n0")
	pool := n0.(*Port).DPDKPool()
	if pool.Size() != poolSize {
		t.Fatalf("pool of %d mbufs; [dpdk] pool_size is %d", pool.Size(), poolSize)
	}
	before := pool.Available()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	const want = 3_000_000
	deadline := time.Now().Add(60 * time.Second)
	for portSnap(e.Snapshot(), "n1").TxPackets < want {
		if time.Now().After(deadline) {
			t.Fatalf("forwarded only %d packets in 60s", portSnap(e.Snapshot(), "n1").TxPackets)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.Stop()
	s := e.Snapshot()
	rx, n1 := portSnap(s, "n0"), portSnap(s, "n1")
	if n1.TxPackets < want || rx.RxPackets != n1.TxPackets {
		t.Errorf("rx %d on n0, tx %d on n1", rx.RxPackets, n1.TxPackets)
	}
	if len(s.Drops) != 0 {
		t.Errorf("drops: %+v", s.Drops)
	}
	for _, st := range s.Stages {
		if st.Kind == "engine" {
			t.Errorf("the engine copied or dropped packets: %+v", st)
		}
	}
	found := false
	for _, ps := range s.Pools {
		found = found || ps.Name == pool.Name()
	}
	if !found {
		t.Errorf("the port's mbuf pool %s is not in the engine's pool stats", pool.Name())
	}
	if !strings.HasPrefix(n1.Driver, "dpdk") {
		t.Errorf("driver %q", n1.Driver)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := pool.Available(); got != before {
		t.Fatalf("after %d packets the pool has %d mbufs available, %d before", n1.TxPackets, got, before)
	}
	if lcoreIDs.n.Load() != 1 || lcoreIDs.id[0].Load() < 0 {
		t.Fatalf("the lcore thread was not an EAL thread: %d instances, lcore id %d", lcoreIDs.n.Load(), lcoreIDs.id[0].Load())
	}
	if LcoreID() != -1 && LcoreID() == int(lcoreIDs.id[0].Load()) {
		t.Fatalf("the test goroutine shares the engine lcore's EAL id %d", LcoreID())
	}
	t.Logf("%d packets through the engine; lcore id %d", n1.TxPackets, lcoreIDs.id[0].Load())
}

// TestEngineCopyRuns: a port that sends only its own mbufs gets the packets
// of another pool as copies, a run of them at a time. Two generators, one in
// the port's mbufs and one in the engine's own pool, send 1000 packets each
// through one pipeline to a net_pcap port: their bursts alternate in the tx
// buffer. Every packet of the second is copied (tx_copies), none of the
// first; each stream comes out whole and in order; no drops; and every mbuf
// is back in the pool afterwards.
func TestEngineCopyRuns(t *testing.T) {
	requireEAL(t)
	dir := t.TempDir()
	empty, out := filepath.Join(dir, "empty.pcap"), filepath.Join(dir, "out.pcap")
	writePcap(t, empty, nil)
	gen := func(name, pool string, sport int) string {
		return fmt.Sprintf(`[[pipelines.stages]]
kind = "generator"
name = %q
ip_version = 4
src = "192.0.2.1"
dst = "192.0.2.2"
udp_src_port = %d
sizes = [64, 200]
count = 1000
pool = %q
`, name, sport, pool)
	}
	e := buildEngine(t, fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "p"
driver = "dpdk"
device = "%s,rx_pcap=%s,tx_pcap=%s"
[[pipelines]]
name = "gen"
%s%s[[pipelines.stages]]
kind = "forward"
port = "p"
`, vdev("net_pcap"), empty, out, gen("mbufs", "port:p", 1000), gen("slab", "default", 2000)), appliance.Options{})
	p, _ := e.Port("p")
	pool := p.(*Port).DPDKPool()
	before := pool.Available()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); portSnap(e.Snapshot(), "p").TxPackets < 2000 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	e.Stop()
	s := e.Snapshot()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := portSnap(s, "p").TxPackets; got != 2000 || len(s.Drops) != 0 {
		t.Fatalf("%d packets sent, want 2000; drops %+v", got, s.Drops)
	}
	var copies uint64
	for _, st := range s.Stages {
		if st.Kind == "engine" {
			for _, c := range st.Counters {
				if c.Name == "tx_copies" {
					copies += c.Value
				}
			}
		}
	}
	if copies != 1000 {
		t.Errorf("%d packets copied at tx, want the engine pool's 1000", copies)
	}
	if got := pool.Available(); got != before {
		t.Errorf("the pool has %d mbufs available, %d before", got, before)
	}
	next := map[uint16]uint64{1000: 0, 2000: 0}
	for i, d := range readPcap(t, out) {
		sport := binary.BigEndian.Uint16(d[34:])
		seq := binary.BigEndian.Uint64(d[42:]) & (1<<48 - 1)
		want, ok := next[sport]
		if !ok || seq != want || len(d) != []int{60, 196}[seq%2] {
			t.Fatalf("frame %d: source port %d, sequence %d, %d bytes; want sequence %d of 60 or 196 bytes", i, sport, seq, len(d), want)
		}
		next[sport]++
	}
	if next[1000] != 1000 || next[2000] != 1000 {
		t.Errorf("frames per stream: %v", next)
	}
}
