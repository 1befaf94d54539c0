//go:build dpdk

package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cpuset"
	"github.com/linerate/linerate/bench/internal/genframe"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/ports/dpdk"
)

var ealErr error

// One EAL per test binary, as the benchmark has one per process.
func TestMain(m *testing.M) {
	cpus := cpuset.Allowed()
	ealErr = dpdk.Start([]string{"-l", strconv.Itoa(cpus[0]), "--no-huge", "--in-memory", "--no-pci", "--no-telemetry",
		"-m", "1024", "--log-level", "warning"}, dpdk.EAL{PoolSize: poolSize, PoolCache: 256})
	code := m.Run()
	if ealErr == nil {
		dpdk.Cleanup()
	}
	os.Exit(code)
}

func requireEAL(t *testing.T) {
	t.Helper()
	testenv.Require(t, fmt.Sprintf("a DPDK EAL (%v)", ealErr), ealErr == nil)
}

func benchCPU() int {
	cpus := cpuset.Allowed()
	return cpus[len(cpus)-1]
}

// monoNow is CLOCK_MONOTONIC in ns, the clock both sides stamp with.
func monoNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// emptyPcap writes a pcap with no packets, for net_pcap's rx side.
func emptyPcap(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "empty.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pcapgo.NewWriter(f).WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFrames(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, data)
	}
}

// TestSameFrames: the C reference and the generator send the same frames.
// Each sends 1000 packets to a net_pcap port; both captures must be
// genframe's frame byte for byte apart from the generator's fields and the
// UDP checksum, whose values must be valid on both sides: flow 0 and
// sequence numbers 0, 1, 2 …, timestamps on CLOCK_MONOTONIC within the run
// and never going back, and IPv4 and UDP checksums that tshark accepts (and
// gopacket decodes the generator's).
func TestSameFrames(t *testing.T) {
	requireEAL(t)
	const n = 1000
	empty := emptyPcap(t)
	dir := t.TempDir()
	cpu := benchCPU()
	f := genframe.IPv4(genSize - 4)

	cPcap := filepath.Join(dir, "c.pcap")
	port, err := dpdk.Open(dpdk.Options{Name: "c", Device: fmt.Sprintf("net_pcap40,rx_pcap=%s,tx_pcap=%s", empty, cPcap)})
	if err != nil {
		t.Fatal(err)
	}
	c0 := monoNow(t)
	r := runCGen(port, f, genFields, n, cpu, 20*time.Second)
	c1 := monoNow(t)
	if err := port.Close(); err != nil {
		t.Fatal(err)
	}
	if r.packets != n {
		t.Fatalf("the C loop sent %d packets, want %d", r.packets, n)
	}

	gPcap := filepath.Join(dir, "gen.pcap")
	g0 := monoNow(t)
	runEngineCount(t, fmt.Sprintf("net_pcap41,rx_pcap=%s,tx_pcap=%s", empty, gPcap), "port:n0", cpu, n)
	g1 := monoNow(t)

	cf, gf := readFrames(t, cPcap), readFrames(t, gPcap)
	if len(cf) != n || len(gf) != n {
		t.Fatalf("captured %d frames from C and %d from the generator, want %d each", len(cf), len(gf), n)
	}
	if err := f.Check(cf, c0, c1, false); err != nil {
		t.Fatalf("C: %v", err)
	}
	if err := f.Check(gf, g0, g1, false); err != nil {
		t.Fatalf("generator: %v", err)
	}
	for i, d := range gf {
		if p := gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default); p.ErrorLayer() != nil || p.Layer(layers.LayerTypeUDP) == nil {
			t.Fatalf("generator frame %d does not decode as Ethernet/IPv4/UDP: %v", i, p)
		}
	}
	for _, path := range []string{cPcap, gPcap} {
		tsharkChecksums(t, path, n)
	}
}

// tsharkChecksums has tshark verify every frame's IPv4 and UDP checksums.
func tsharkChecksums(t *testing.T, path string, n int) {
	t.Helper()
	tshark := testenv.RequireCmd(t, "tshark")
	cmd := exec.Command(tshark, "-n", "-r", path, "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-e", "ip.checksum.status", "-e", "udp.checksum.status")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.Bytes())
	}
	good := 0
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "1" && f[1] == "1" { // 1: good
			good++
		}
	}
	if good != n {
		t.Fatalf("%s: tshark finds %d of %d frames with good IPv4 and UDP checksums:\n%.2000s", path, good, n, out)
	}
}

// runEngineCount runs the benchmark's generator config for count packets from
// pool onto device, and waits until the port sent them.
func runEngineCount(t *testing.T, device, pool string, cpu, count int) {
	t.Helper()
	cfg, err := config.Parse("bench-gen.toml", []byte(genConfig(device, pool, cpu, uint64(count))))
	if err != nil {
		t.Fatal(err)
	}
	e, err := appliance.New(cfg, appliance.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		_ = e.Close()
		t.Fatal(err)
	}
	sent := func() uint64 {
		for _, p := range e.Snapshot().Ports {
			if p.Name == "n0" {
				return p.TxPackets
			}
		}
		return 0
	}
	for deadline := time.Now().Add(30 * time.Second); sent() < uint64(count) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	e.Stop()
	got := sent()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got != uint64(count) {
		t.Fatalf("the generator's port sent %d packets, want %d", got, count)
	}
}

// TestBenchGenerator runs each loop of the benchmark (make bench-dpdk
// BENCH_DPDK_FLAGS=-generator) on a net_null port for a count of packets
// rather than a time, so that a busy machine cannot starve a run to nothing:
// the three C loops and the generator from both pools all send them. How fast
// is the benchmark's to say, not a test's.
func TestBenchGenerator(t *testing.T) {
	requireEAL(t)
	const n = 100_000
	out, err := dpdk.Open(dpdk.Options{Name: "out", Device: "net_null42"})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	f := genframe.IPv4(genSize - 4)
	for _, mode := range []int{genFields, genFields | genOnePass, 0} {
		if r := runCGen(out, f, mode, n, benchCPU(), time.Minute); r.packets != n || r.cpu <= 0 {
			t.Errorf("C loop, mode %d: %+v", mode, r)
		}
	}
	for i, pool := range []string{"port:n0", ""} {
		runEngineCount(t, fmt.Sprintf("net_null%d", 43+i), pool, benchCPU(), n)
	}
}
