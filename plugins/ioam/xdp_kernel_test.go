//go:build linux

package ioam

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/ioam/bpf"

	_ "github.com/linerate/linerate/plugins/route" // punt
	_ "github.com/linerate/linerate/ports/tap"
	_ "github.com/linerate/linerate/ports/xdp"
)

// linerate's XDP transit, then the Linux kernel's IOAM transit node, on one
// interface: the device-bound program on lra1 writes its node data as the
// frame arrives, the kernel (ioam6_enabled on lra1) writes its own as it
// forwards, and linerate's decap reads both. The XDP node's bytes are the
// Go stage's for the same frame, but for its timestamps and the fields
// unknown at XDP ingress, and the kernel takes the trace the program left
// (its data lands in the next slot, RemainingLen lowered by both).
func TestXDPTransitThenKernel(t *testing.T) {
	h := newHarness(t)
	requireTransit(t, 1) // device-bound
	kl := newKernelLab(t, h)
	xdpKeys := nodeKeys(2)
	goTr := h.MustBuildNamed("ioam.transit", "tr", xdpKeys).(*transit)
	var prog *bpf.Transit
	var lk link.Link
	err := kl.k.Do(func() error {
		ifi, err := net.InterfaceByName("lra1")
		if err != nil {
			return err
		}
		if prog, err = bpf.LoadTransit(ifi.Index); err != nil {
			return err
		}
		c, nss := goTr.xdpConfig(h.Clock, map[int]uint16{ifi.Index: 0})
		if err := prog.Configure(c, nss); err != nil {
			return err
		}
		lk, err = link.AttachXDP(link.XDPOptions{Program: prog.Program, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if prog != nil {
		t.Cleanup(func() { prog.Close() })
	}
	if err != nil {
		t.Fatalf("the XDP transit on lra1: %v", err)
	}
	t.Cleanup(func() { lk.Close() })
	for _, tt := range []uint32{0xC00000, 0xF00000, 0xFC0000, 0x00E000, 0xFFF002} {
		t.Run(fmt.Sprintf("type=%#06x", tt), func(t *testing.T) {
			room := 4
			if NodeLen(tt) > 8 {
				room = 3
			}
			enc := h.MustBuild("ioam.encap", fmt.Sprintf(`
node_id = 1
node_id_wide = 0x101
timestamp = "posix"
mode = "encap"
src = %q
dst = %q
namespaces = [ { id = 123, data = 0xE1 } ]
[[profiles]]
trace = { namespace = 123, type = "%#06x", hops = %d }
`, kl.outerSrc, kl.outerDst, tt, room))
			dec := h.MustBuild("ioam.decap", `
node_id = 3
node_id_wide = 0x303
timestamp = "posix"
export = true
namespaces = [ { id = 123, data = 0xD3 } ]
`)
			in := buildFrame(t, frameSpec{payload: 300, hopLimit: 40})
			out := h.run(in, 0, false, enc).data
			// What the Go stage writes for the frame lra1 receives.
			want := h.run(kl.kernelMACs(out), 0, false, goTr).data
			got := kl.forward(t, h, out)
			if got == nil {
				t.Fatal("nothing came through the kernel")
			}
			const tr = 14 + 40 + 8
			rem := int(Trace(want[tr:]).RemainingLen())
			ns := goTr.ns.lookup(123)
			var pl nodePlan
			if !pl.build(&ns.Namespace, tt, goTr.eg) {
				t.Fatal("no plan")
			}
			node := tr + TraceHeaderLen + rem*4
			g, w := append([]byte(nil), got[node:node+pl.size]...), append([]byte(nil), want[node:node+pl.size]...)
			for _, off := range []int16{pl.sec, pl.frac, pl.delay, pl.queue, pl.buffer} {
				if off >= 0 {
					clear(g[off : off+4])
					clear(w[off : off+4])
				}
			}
			if !bytes.Equal(g, w) {
				t.Errorf("the XDP node's data, as the kernel forwarded it:\n%x\nthe Go stage's:\n%x", g, w)
			}
			if r := Trace(got[tr:]).RemainingLen(); r != rem-NodeLen(tt)-opaqueOf(tt) {
				t.Errorf("RemainingLen %d after the kernel, %d after linerate's node", r, rem)
			}
			r := h.run(got, 1, false, dec)
			if !bytes.Equal(r.data[14:], in[14:]) {
				t.Error("decap output is not the original packet")
			}
			recs := drainRecords(t, dec)
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			hops := recs[0].Hops()
			if len(hops) != room { // a trace of room 3 has none left for decap
				t.Fatalf("%d hops, want encap, XDP transit, kernel (and decap with room)", len(hops))
			}
			x, k := hops[1], hops[2]
			if tt&TraceHopLimNodeID != 0 && (x.NodeID != 2 || k.NodeID != kNodeID || x.HopLimit != k.HopLimit+1) {
				t.Errorf("XDP hop %+v, kernel hop %+v", x.Node, k.Node)
			}
		})
	}
}

// opaqueOf is the words of an empty opaque snapshot, the kernel's and the
// test config's.
func opaqueOf(tt uint32) int {
	if tt&TraceOpaqueState != 0 {
		return 1
	}
	return 0
}

// ioam.transit with an offload on a real xdp port: linerate runs in the
// kernel namespace with an xdp port on lra1 (named apart from its
// interface: the program knows the ingress port by the port's ifindex, and
// writes its ids). The kernel fills its own node as it routes, and
// linerate's decap on the far side reads encap, the transit, the kernel,
// decap. Two paths, the same records:
//
//   - xdp: offload = "xdp", where the kernel has what the program needs:
//     the program fills its node as frames arrive and hands them to the
//     kernel (ioam6 on lra1);
//   - fallback: offload = "auto" where the kernel lacks
//     bpf_ktime_get_tai_ns (forced, so on every kernel): the port's IOAM
//     rule takes the frames up to the Go stage, which fills the node, and a
//     punt stage hands them to the kernel through a TAP (ioam6 on it);
//   - refused: offload = "xdp" there fails, naming the feature in one line.
func TestXDPTransitOffloadEngine(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireKernel(t, kernel.XSKMap, kernel.Loop) // every xdp port's
	toml := func(offload string) string {
		return `
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "edge0"
driver = "xdp"
interface = "lra1"
[[ports.match]]          # what the program leaves to Go; all IOAM without it
ioam = true
[[ports]]
name = "host0"
driver = "tap"
interface = "lrtap"
mac = "02:00:00:00:77:01"

[[pipelines]]
name = "transit"
lcores = [1]
rx = ["edge0"]
[[pipelines.stages]]
kind = "ioam.transit"
name = "tr"
offload = "` + offload + `"
node_id = 2
node_id_wide = 0x202
timestamp = "posix"
egress_port = "edge0"
namespaces = [ { id = 123, data = 0xD2 } ]
interfaces = [ { port = "edge0", id = 20, id_wide = 2000 } ]
[[pipelines.stages]]
kind = "punt"            # to the kernel, which routes it
name = "host"
port = "host0"
`
	}
	engine := func(t *testing.T, kl *kernelLab, offload string, log *slog.Logger) (*appliance.Engine, error) {
		cfg, err := config.Parse("transit.toml", []byte(toml(offload)))
		if err != nil {
			t.Fatal(err)
		}
		var e *appliance.Engine
		if err := kl.k.Do(func() (err error) {
			e, err = appliance.New(cfg, appliance.Options{Log: log})
			return err
		}); err != nil {
			return nil, err
		}
		t.Cleanup(func() {
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
		return e, nil
	}
	run := func(t *testing.T, offload string, inKernel bool) {
		h := newHarness(t)
		kl := newKernelLab(t, h)
		var logs lockedLog
		e, err := engine(t, kl, offload, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		// The kernel takes the punted frames on the TAP as it takes them on
		// lra1: IPv6, no addresses of its own, its IOAM node on.
		kl.k.Sysctl(t, [][2]string{
			{"ipv6/conf/lrtap/addr_gen_mode", "1"}, {"ipv6/conf/lrtap/accept_dad", "0"},
			{"ipv6/conf/lrtap/disable_ipv6", "0"}, {"ipv6/conf/lrtap/forwarding", "1"},
			{"ipv6/conf/lrtap/ioam6_enabled", "1"}, {"ipv6/conf/lrtap/ioam6_id", fmt.Sprint(kIngressID)},
		})
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		want := 0
		if !inKernel {
			want = 1
		}
		if n := strings.Count(logs.String(), "stage runs in Go"); n != want ||
			want == 1 && !strings.Contains(logs.String(), "bpf_ktime_get_tai_ns") {
			t.Errorf("%d lines say the stage runs in Go, want %d:\n%s", n, want, logs.String())
		}
		enc := h.MustBuild("ioam.encap", fmt.Sprintf(`
node_id = 1
timestamp = "posix"
mode = "encap"
src = %q
dst = %q
namespaces = [ { id = 123 } ]
[[profiles]]
trace = { namespace = 123, type = "0xd40000", hops = 4 }
`, kl.outerSrc, kl.outerDst))
		dec := h.MustBuild("ioam.decap", `
node_id = 3
timestamp = "posix"
export = true
namespaces = [ { id = 123 } ]
`)
		const n = 3
		for i := range n {
			got := kl.forward(t, h, h.run(buildFrame(t, frameSpec{payload: 100, hopLimit: 40}), 0, false, enc).data)
			if got == nil {
				t.Fatalf("frame %d: nothing came through the kernel; stages %+v", i, e.Snapshot().Stages)
			}
			h.run(got, 1, false, dec)
			recs := drainRecords(t, dec)
			if len(recs) != 1 || len(recs[0].Hops()) != 4 {
				t.Fatalf("frame %d: %d records", i, len(recs))
			}
			x := recs[0].Hops()[1]
			if x.NodeID != 2 || x.HopLimit != 40 || x.IngressIf != 20 || x.EgressIf != 20 || x.NamespaceData != 0xD2 {
				t.Errorf("frame %d: linerate's transit's hop %+v", i, x.Node)
			}
			if k := recs[0].Hops()[2]; k.NodeID != kNodeID {
				t.Errorf("frame %d: the kernel's hop %+v", i, k.Node)
			}
		}
		// The program's counters reach the stage's within a tick or so.
		wantPunted := uint64(0)
		if !inKernel {
			wantPunted = n
		}
		var filled, toGo, punted uint64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			s := e.Snapshot()
			filled, toGo = enginetest.Counter(s, "tr", "filled"), enginetest.Counter(s, "tr", "xdp_to_go")
			punted = s.Counter("host", "punted")
			if filled == n && punted == wantPunted {
				break
			}
		}
		if filled != n || toGo != 0 || punted != wantPunted {
			t.Errorf("filled %d, left to Go by the program %d, punted %d; want %d, 0, %d", filled, toGo, punted, n, wantPunted)
		}
	}
	t.Run("xdp", func(t *testing.T) {
		requireTransit(t, 0)
		run(t, "xdp", true)
	})
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
		run(t, "auto", false)
	})
	t.Run("refused", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
		h := newHarness(t)
		_, err := engine(t, newKernelLab(t, h), "xdp", enginetest.Quiet)
		if err == nil || !strings.Contains(err.Error(), `offload = "xdp": the kernel lacks bpf_ktime_get_tai_ns (Linux >= 6.1)`) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("offload = \"xdp\" without bpf_ktime_get_tai_ns: %v", err)
		}
	})
}

// lockedLog is an engine's log, which its lcores write while the test
// reads it.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
