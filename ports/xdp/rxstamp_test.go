//go:build linux

package xdp

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/porttest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/ports"
)

// TestPlanRx: the rx timestamp source is chosen from the probes, before
// anything loads: the best that works for auto, an error naming what is
// missing for hardware and kernel. LINERATE_KERNEL_DISABLE stands in for a
// kernel without the feature, so every branch runs here.
func TestPlanRx(t *testing.T) {
	testenv.RequireRoot(t)          // the probes load programs
	t.Setenv(kernel.DisableEnv, "") // each case says what is off
	testenv.RequireKernel(t, kernel.KtimeGetNs, kernel.XDPAdjustHead)
	head := viaHead
	for _, c := range []struct {
		name, env, mode string
		host, phc       bool
		forced          *stampVia
		source          string
		via             stampVia
		driverNo        bool   // the driver says it gives XDP no rx stamp
		fellBack        bool   // kernelLacks set: a fallback
		has, err        string // in the line, in the error
		missing         kernel.Feature
	}{
		{name: "no metadata", env: "bpf_xdp_adjust_meta", mode: "auto", host: true, source: "kernel", via: viaHead,
			fellBack: true, has: "rx timestamps: kernel (bpf_ktime_get_ns in the XDP dispatcher, carried in the " +
				"headroom; LINERATE_KERNEL_DISABLE turns off bpf_xdp_adjust_meta; xa has no PTP hardware clock)"},
		{name: "kernel asked", env: "bpf_xdp_adjust_meta", mode: "kernel", host: true, source: "kernel", via: viaHead,
			fellBack: true, has: "turns off bpf_xdp_adjust_meta)"},
		{name: "no carrier", env: "bpf_xdp_adjust_meta,bpf_xdp_adjust_head", mode: "auto", host: true,
			source: "engine", fellBack: true, has: "rx timestamps: engine (the lcore's clock when it takes the " +
				"burst; LINERATE_KERNEL_DISABLE turns off bpf_xdp_adjust_meta; LINERATE_KERNEL_DISABLE turns off " +
				"bpf_xdp_adjust_head; xa has no PTP hardware clock)"},
		{name: "no carrier, kernel asked", env: "bpf_xdp_adjust_meta,bpf_xdp_adjust_head", mode: "kernel",
			host: true, err: `rx_timestamp = "kernel" needs bpf_xdp_adjust_meta or bpf_xdp_adjust_head in XDP ` +
				"programs: the kernel lacks bpf_xdp_adjust_head", missing: kernel.XDPAdjustHead},
		{name: "no clock", env: "bpf_ktime_get_ns", mode: "kernel", host: true,
			err: "needs bpf_ktime_get_ns in XDP programs", missing: kernel.KtimeGetNs},
		{name: "no clock, auto", env: "bpf_ktime_get_ns", mode: "auto", host: true, source: "engine", fellBack: true,
			has: "turns off bpf_ktime_get_ns"},
		{name: "hardware without a PHC", mode: "hardware", host: true,
			err: `rx_timestamp = "hardware": xa has no PTP hardware clock (ethtool -T xa)`},
		{name: "hardware without device-bound programs", env: "device-bound XDP programs", mode: "hardware",
			host: true, phc: true, err: "the kernel lacks device-bound XDP programs", missing: kernel.DevBound},
		{name: "hardware without the kfunc", env: "bpf_xdp_metadata_rx_timestamp", mode: "hardware", host: true,
			phc: true, err: "the kernel lacks bpf_xdp_metadata_rx_timestamp", missing: kernel.RxTimestampKfunc},
		{name: "auto without device-bound programs", env: "device-bound XDP programs,bpf_xdp_adjust_meta",
			mode: "auto", host: true, phc: true, source: "kernel", via: viaHead, fellBack: true,
			has: "; xa takes no device-bound XDP program; LINERATE_KERNEL_DISABLE turns off bpf_xdp_adjust_meta)"},
		{name: "hardware, a driver without XDP stamps", mode: "hardware", host: true, phc: true, driverNo: true,
			err: "xa's driver gives XDP programs no rx timestamp"},
		{name: "engine asked", mode: "engine", host: true, source: "engine", has: `; rx_timestamp = "engine")`},
		{name: "virtual time", mode: "auto", source: "engine", has: "the engine runs in virtual time"},
		{name: "virtual time, kernel asked", mode: "kernel", err: "needs the host clock"},
		{name: "forced", env: "bpf_xdp_adjust_head", mode: "auto", host: true, forced: &head, source: "kernel",
			via: viaHead},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(kernel.DisableEnv, c.env)
			ifc := iface{name: "xa", index: 1, phc: c.phc}
			if c.phc { // a driver that stamps: the kernel's checks decide
				ifc.feat = xdpFeatures{known: true, native: true, rxTimestamp: !c.driverNo}
			}
			r, err := planRx(c.mode, ifc, c.host, c.forced)
			if c.err != "" {
				f, missing := kernel.IsMissing(err)
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") ||
					c.missing != 0 && (!missing || f != c.missing) {
					t.Fatalf("error %v, want one line with %q (missing %v)", err, c.err, c.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.source != c.source || r.via != c.via || (len(r.kernelLacks) > 0) != c.fellBack ||
				!strings.Contains(r.line(), c.has) {
				t.Errorf("plan %s via %s, lacks %q, line %q; want %s via %s, fallback %v, %q", r.source, r.via,
					r.kernelLacks, r.line(), c.source, c.via, c.fellBack, c.has)
			}
			f := r.finding("p0")
			if f.Need != "rx timestamps" || f.Subject != `port "p0"` || (f.Outcome == ports.FallsBack) != c.fellBack ||
				!strings.HasPrefix(f.Detail, c.source+", ") {
				t.Errorf("finding %+v", f)
			}
		})
	}
}

// waitRing waits until queue 0's rx ring holds n frames, without taking
// them.
func waitRing(t *testing.T, p *Port, n uint32) {
	t.Helper()
	s := p.q[0].s
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if atomic.LoadUint32(s.rx.prod)-*s.rx.cons >= n {
			return
		}
	}
	t.Fatalf("the rx ring holds %d frames after %v, want %d", atomic.LoadUint32(s.rx.prod)-*s.rx.cons, wait, n)
}

// rxAll takes n frames off queue 0 (they are in its ring).
func rxAll(t *testing.T, p *Port, n int) []packet.Handle {
	t.Helper()
	var b packet.Burst
	var got []packet.Handle
	for tries := 0; len(got) < n && tries < 1000; tries++ {
		b.N = 0
		k := p.RxBurst(0, &b)
		got = append(got, b.H[:k]...)
	}
	if len(got) != n {
		t.Fatalf("took %d of %d frames", len(got), n)
	}
	t.Cleanup(func() { p.u.FreeHandles(got) })
	return got
}

// TestRxTimestampAuto: with rx_timestamp = "auto" on a veth (no PHC) the
// port takes the kernel's stamp in the best variant this kernel has, and
// says so in one Info line, port= once: every frame's RxTime is the
// dispatcher's, taken before the frames were seen in the ring, and so
// before the poll that took them.
func TestRxTimestampAuto(t *testing.T) {
	testenv.RequireRoot(t)
	want := viaMeta
	if !kernel.Has(kernel.XDPAdjustMeta) {
		testenv.RequireKernel(t, kernel.KtimeGetNs, kernel.XDPAdjustHead)
		want = viaHead
	}
	ns := netns.New(t)
	netns.Veth(t, ns, "xa", ns, "xb")
	peer := openRaw(t, ns, "xb")
	l := &logs{}
	p := openPort(t, ns, Options{Name: "p0", Interface: "xa", Rules: []Rule{{UDPDstPort: ptr(862)}},
		Clock: clock.NewSystem(), RingSize: 64, Log: l.logger(slog.LevelInfo)})
	if info := p.Info(); info.TimestampSource != "kernel" || !strings.Contains(info.TimestampDetail, want.String()) {
		t.Errorf("info %+v, want kernel stamps in the %s", info, want)
	}
	lines := l.lines("rx timestamps:")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") ||
		!strings.Contains(lines[0], "rx timestamps: kernel (bpf_ktime_get_ns in the XDP dispatcher") ||
		strings.Count(lines[0], "port=") != 1 || !strings.Contains(lines[0], "interface=xa") ||
		(want == viaHead) != strings.Contains(lines[0], "bpf_xdp_adjust_meta") {
		t.Errorf("want one Info line for the rx timestamps, naming what is missing; the log:\n%s", l)
	}
	const n = 8
	before := clock.Mono()
	for range n {
		peer.send(t, frame6(t, "2001:db8::2", nil, 862))
	}
	waitRing(t, p, n)
	seen := clock.Mono()
	for i, h := range rxAll(t, p, n) {
		if rx := h.P().RxTime; rx < before || rx > seen {
			t.Errorf("frame %d: rx time %d, want the kernel's, in [%d, %d] (sent, seen in the ring)", i, rx,
				before, seen)
		}
	}
}

// TestRxTimestampFallbacks: on a kernel without bpf_xdp_adjust_meta and
// bpf_xdp_adjust_head (LINERATE_KERNEL_DISABLE), "kernel" and "hardware"
// are config errors naming what is missing; "auto" falls back to the
// engine's clock and says so in one line, with the engine's logger (which
// says port= itself).
func TestRxTimestampFallbacks(t *testing.T) {
	t.Setenv(kernel.DisableEnv, "bpf_xdp_adjust_meta,bpf_xdp_adjust_head")
	ns := netns.New(t)
	netns.Veth(t, ns, "xa", ns, "xb")
	for _, c := range []struct {
		mode, want string
		missing    kernel.Feature
	}{
		{"kernel", `rx_timestamp = "kernel" needs bpf_xdp_adjust_meta or bpf_xdp_adjust_head in XDP programs: ` +
			"the kernel lacks bpf_xdp_adjust_head (Linux >= 4.10): LINERATE_KERNEL_DISABLE turns it off",
			kernel.XDPAdjustHead},
		{"hardware", `rx_timestamp = "hardware": xa has no PTP hardware clock (ethtool -T xa)`, 0},
	} {
		err := ns.Do(func() error {
			p, err := New(Options{Name: "p0", Interface: "xa", TakeAll: true, RingSize: 64, RxTimestamp: c.mode})
			if err == nil {
				p.Close()
			}
			return err
		})
		f, missing := kernel.IsMissing(err)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") ||
			c.missing != 0 && (!missing || f != c.missing) {
			t.Errorf("%s: %v, want an error with %q", c.mode, err, c.want)
		}
	}
	l := &logs{}
	var port ports.Port
	err := ns.Do(func() (err error) {
		port, err = open(&ports.Setup{Name: "p0", Config: porttest.Config("interface = \"xa\"\nring_size = 64\n" +
			"take_all = true\n"), RxQueues: 1, TxQueues: 1, Clock: clock.NewSystem(),
			Log: l.logger(slog.LevelInfo).With("port", "p0")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	p := port.(*Port)
	t.Cleanup(func() { p.Close() })
	info := p.Info()
	if info.TimestampSource != "engine" || !strings.Contains(info.TimestampDetail, "turns off bpf_xdp_adjust_head") {
		t.Errorf("info %+v", info)
	}
	lines := l.lines("rx timestamps:")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") ||
		!strings.Contains(lines[0], "rx timestamps: engine (the lcore's clock when it takes the burst; "+
			"LINERATE_KERNEL_DISABLE turns off bpf_xdp_adjust_meta; LINERATE_KERNEL_DISABLE turns off "+
			"bpf_xdp_adjust_head; xa has no PTP hardware clock)") {
		t.Errorf("want one line for the fallback; the log:\n%s", l)
	}
	for _, line := range l.lines("port=") {
		if strings.Count(line, "port=") != 1 {
			t.Errorf("port= twice: %s", line)
		}
	}
	// The engine stamps these: the port leaves RxTime alone.
	peer := openRaw(t, ns, "xb")
	peer.send(t, frame6(t, "2001:db8::2", nil, 862))
	waitRing(t, p, 1)
	if h := rxAll(t, p, 1)[0]; h.P().RxTime != 0 {
		t.Errorf("rx time %d from the port, want 0: the engine's to set", h.P().RxTime)
	}
}

// TestPlan: a dry run that checks the host tells linerate doctor -c what
// the port would get, without attaching: rx timestamps (a fallback to the
// headroom where bpf_xdp_adjust_meta is off; a failure where "kernel"
// cannot be had), the XDP mode and the AF_XDP mode veth gives.
func TestPlan(t *testing.T) {
	testenv.RequireRoot(t)
	t.Setenv(kernel.DisableEnv, "") // each dry run says what is off
	testenv.RequireKernel(t, kernel.KtimeGetNs, kernel.XDPAdjustHead)
	ns := netns.New(t)
	netns.Veth(t, ns, "xa", ns, "xb")
	dry := func(env, conf string) (map[string]ports.Finding, xdpFeatures) {
		t.Helper()
		t.Setenv(kernel.DisableEnv, env)
		got := map[string]ports.Finding{}
		var feat xdpFeatures
		err := ns.Do(func() error {
			s := &ports.Setup{Name: "s0", Config: porttest.Config("interface = \"xa\"\ntake_all = true\n" + conf),
				RxQueues: 1, TxQueues: 1, DryRun: true, Plan: func(f ports.Finding) {
					if f.Subject != `port "s0"` || got[f.Need].Need != "" {
						t.Errorf("finding %+v: subject, or twice", f)
					}
					got[f.Need] = f
				}}
			p, err := open(s)
			fails := false
			for _, f := range got {
				fails = fails || f.Outcome == ports.Fails
			}
			// What cannot work here fails the dry run (validate) too.
			if p != nil || (err != nil) != fails {
				t.Errorf("dry run: %v, %v (a finding fails: %v)", p, err, fails)
			}
			ifc, err := net.InterfaceByName("xa")
			if err != nil {
				return err
			}
			if _, _, on := xdpAttached(ifc.Index); on {
				t.Error("a dry run attached an XDP program")
			}
			feat = devXDPFeatures(ifc.Index)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, feat
	}
	got, feat := dry("bpf_xdp_adjust_meta", "")
	want := ports.Finding{Subject: `port "s0"`, Need: "rx timestamps", Outcome: ports.FallsBack,
		Detail: "kernel, in the frame's headroom: LINERATE_KERNEL_DISABLE turns off bpf_xdp_adjust_meta; " +
			"xa has no PTP hardware clock"}
	if got["rx timestamps"] != want {
		t.Errorf("rx timestamps:\n got %+v\nwant %+v", got["rx timestamps"], want)
	}
	attach, xsk := got["XDP attach"], got["AF_XDP"]
	if feat.known {
		// veth: native XDP, no zero-copy AF_XDP.
		if attach.Outcome != ports.AsAsked || attach.Detail != "native mode" {
			t.Errorf("XDP attach: %+v", attach)
		}
		if xsk.Outcome != ports.FallsBack || xsk.Detail != "copy mode: xa's driver has no zero-copy AF_XDP" {
			t.Errorf("AF_XDP: %+v", xsk)
		}
	} else if !strings.Contains(attach.Detail, "tells only by attaching") || !strings.Contains(xsk.Detail, "binding") {
		t.Errorf("a kernel that does not say: %+v, %+v", attach, xsk)
	}
	got, _ = dry("bpf_xdp_adjust_meta,bpf_xdp_adjust_head", "rx_timestamp = \"kernel\"\nbind = \"zerocopy\"\n")
	if f := got["rx timestamps"]; f.Outcome != ports.Fails || !strings.Contains(f.Detail, "lacks bpf_xdp_adjust_head") {
		t.Errorf("rx timestamps: %+v", f)
	}
	if f := got["AF_XDP"]; feat.known && f.Outcome != ports.Fails {
		t.Errorf("AF_XDP zerocopy on veth: %+v", f)
	}
}

// TestDispatcherStamp: with a socket on the queue, what the dispatcher
// redirects carries the stamp right in front of the frame (BPF_PROG_TEST_RUN
// gives the data from the metadata area on: both variants look alike
// there), and the engine variant carries none; with the socket gone the
// frame is passed and the kernel gets it byte for byte.
func TestDispatcherStamp(t *testing.T) {
	eachVariant(t, func(t *testing.T, v variant) {
		ns := netns.New(t)
		netns.Veth(t, ns, "xa", ns, "xb")
		p := openPort(t, ns, Options{Name: "p0", Interface: "xa", Rules: []Rule{{UDPDstPort: ptr(862)}},
			RingSize: 64, forceVia: &v.via})
		if p.devBound {
			t.Fatal("device-bound on veth: BPF_PROG_TEST_RUN refuses it")
		}
		in := frame6(t, "2001:db8::2", nil, 862)
		t0 := clock.Mono()
		ret, out := runOnce(t, p.d.prog, in)
		t1 := clock.Mono()
		if ret != xdpRedirect {
			t.Fatalf("action %d, want XDP_REDIRECT", ret)
		}
		frame := out
		if v.via != viaNone {
			checkStamp(t, "redirected", out, t0, t1)
			frame = out[lrMetaSize:]
		}
		if !bytes.Equal(frame, in) {
			t.Errorf("redirected:\n got %x\nwant [stamp] %x", out, in)
		}
		if err := p.d.xsks.Delete(uint32(0)); err != nil {
			t.Fatal(err)
		}
		ret, out = runOnce(t, p.d.prog, in)
		if got := kernelView(v, out, true); ret != xdpPass || !bytes.Equal(got, in) {
			t.Errorf("no socket: action %d, the kernel got %x, want %x", ret, got, in)
		}
	})
}

// TestPassIntact: a frame the rules take for a queue without a socket goes
// to the kernel's stack as it came, in native and generic mode: the
// headroom variant takes its stamp back (a packet socket on the port's
// interface sees the frame).
func TestPassIntact(t *testing.T) {
	eachVariant(t, func(t *testing.T, v variant) {
		for _, mode := range []string{"native", "generic"} {
			ns := netns.New(t)
			netns.Veth(t, ns, "xa", ns, "xb")
			peer, tap := openRaw(t, ns, "xb"), openRaw(t, ns, "xa")
			p := openPort(t, ns, Options{Name: "p0", Interface: "xa", Rules: []Rule{{UDPDstPort: ptr(862)}},
				RingSize: 64, Attach: mode, forceVia: &v.via})
			if p.mode != mode {
				t.Fatalf("attached in %s mode, want %s", p.mode, mode)
			}
			if err := p.d.xsks.Delete(uint32(0)); err != nil {
				t.Fatal(err)
			}
			in := frame6(t, "2001:db8::2", nil, 862)
			in[len(in)-1] = 0x5a
			peer.send(t, in)
			got := tap.recv(t, 1, func(f []byte) bool { return len(f) > 0 && f[len(f)-1] == 0x5a })
			if len(got) != 1 || !bytes.Equal(got[0], in) {
				t.Errorf("%s mode: the kernel got %x, want %x", mode, got, in)
			}
			if st := p.Stats(); st.Extra["xdp_no_socket"] != 1 || st.Extra["xdp_matched"] != 1 {
				t.Errorf("%s mode: counters %v", mode, st.Extra)
			}
		}
	})
}

// helperCalls are the helper calls (by the kernel's translated immediate)
// in prog as the kernel runs it, after the verifier dropped what it never
// reached.
func helperCalls(t *testing.T, prog *ebpf.Program) map[int64]int {
	t.Helper()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	insns, err := info.Instructions()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[int64]int{}
	for _, ins := range insns {
		if ins.OpCode.JumpOp() == asm.Call && ins.Src == asm.R0 {
			calls[ins.Constant]++
		}
	}
	return calls
}

// helperImm is the translated immediate of a call to fn: that of a tiny
// XDP program that calls it. ok is false where the kernel refuses it.
func helperImm(t *testing.T, fn asm.BuiltinFunc) (int64, bool) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R2, 0),
		fn.Call(),
		asm.Mov.Imm(asm.R0, 2),
		asm.Return(),
	}})
	if err != nil {
		return 0, false
	}
	defer prog.Close()
	for imm := range helperCalls(t, prog) {
		return imm, true
	}
	t.Fatal("no helper call in the reference program")
	return 0, false
}

// TestVariantPruned: stamp_via is a load-time constant, and the verifier
// drops the other variant's helper call: the program as the kernel runs it
// calls bpf_xdp_adjust_meta only in the metadata variant and
// bpf_xdp_adjust_head only in the headroom variant. On a kernel that
// refuses bpf_xdp_adjust_meta the headroom variant's load proves it too.
func TestVariantPruned(t *testing.T) {
	eachVariant(t, func(t *testing.T, v variant) {
		d := loadVariant(t, v, false)
		calls := helperCalls(t, d.prog)
		for _, h := range []struct {
			fn   asm.BuiltinFunc
			uses stampVia
		}{{asm.FnXdpAdjustMeta, viaMeta}, {asm.FnXdpAdjustHead, viaHead}} {
			imm, ok := helperImm(t, h.fn)
			if !ok {
				if v.via == h.uses {
					t.Errorf("%v: the kernel refuses it, yet the %s variant loaded", h.fn, v.name)
				}
				continue // refused: the variant loaded without it
			}
			if got := calls[imm] > 0; got != (v.via == h.uses) {
				t.Errorf("%s variant: calls %v: %v, want %v", v.name, h.fn, got, v.via == h.uses)
			}
		}
	})
}

// TestVerifierLog: a program the verifier refuses is one line for the
// user, naming the file (mode 0600, a new file) that holds the verifier's
// whole log; the log goes to the logger at Debug only.
func TestVerifierLog(t *testing.T) {
	testenv.RequireRoot(t)
	_, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Return()}}) // R0 never set
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Fatalf("want a verifier error, got %v", err)
	}
	check := func(err error, what string) {
		t.Helper()
		msg := err.Error()
		m := regexp.MustCompile(`\(the verifier's log: (/\S+linerate-verifier-p_0-\d+-\d+\.log)\)$`).FindStringSubmatch(msg)
		if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, what+": ") || m == nil {
			t.Fatalf("error %q: want one line, naming the log's file", msg)
		}
		t.Cleanup(func() { os.Remove(m[1]) })
		st, err := os.Lstat(m[1])
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v: want a regular file, mode 0600", m[1], st, err)
		}
	}
	debug, info := &logs{}, &logs{}
	e1 := loadFailed(debug.logger(slog.LevelDebug), "load a test program", "p/0", err)
	e2 := loadFailed(info.logger(slog.LevelInfo), "load a test program", "p/0", err)
	for _, e := range []error{e1, e2} {
		check(e, "load a test program")
		var got *ebpf.VerifierError
		if !errors.As(e, &got) {
			t.Errorf("%v: the verifier error is not in the chain", e)
		}
		f := regexp.MustCompile(`: (/\S+\.log)\)$`).FindStringSubmatch(e.Error())[1]
		b, _ := os.ReadFile(f)
		for _, line := range ve.Log {
			if !bytes.Contains(b, []byte(line)) {
				t.Errorf("%s lacks the log's line %q", f, line)
			}
		}
	}
	if !strings.Contains(debug.String(), "level=DEBUG") || !strings.Contains(debug.String(), "R0 !read_ok") {
		t.Errorf("debug log:\n%s", debug)
	}
	if info.String() != "" {
		t.Errorf("the verifier's log at Info:\n%s", info)
	}
	// The dispatcher itself, where the kernel refuses the metadata helper.
	if !kernel.Has(kernel.XDPAdjustMeta) {
		_, err := loadDispatcher(dispatcherConfig{via: viaMeta, name: "p/0"}, nil)
		if err == nil {
			t.Fatal("the metadata variant loaded on a kernel that refuses bpf_xdp_adjust_meta")
		}
		check(err, "load the XDP dispatcher")
		if !strings.Contains(err.Error(), "bpf_xdp_adjust_meta") {
			t.Errorf("%v: want the refusal", err)
		}
	}
}
