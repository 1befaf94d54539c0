//go:build linux

package stamp

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// The seed's SDN controller drives linerate unchanged: a Python client with
// stubs generated from plugins/stamp/api/srv6pm (grpc_tools.protoc) runs Init
// (with the seed's sender UDP port, 50000), Create, Start,
// GetStampSessionResults while running, Stop, GetStampSessionResults and
// Destroy against two linerate processes with default STAMP stages (no
// port set anywhere), a Session-Sender and a Session-Reflector joined by a
// veth pair, and gets consistent T1..T4.
func TestSeedController(t *testing.T) { runSeedController(t, "") }

// TestSeedControllerXDP is TestSeedController with the reflector on an xdp
// port and an offload. The seed's controller drives it through the same
// API. "xdp": offload = "xdp", the unauthenticated session's test packets
// are reflected in the kernel, the authenticated one's in Go; "fallback":
// offload = "auto" where the kernel lacks bpf_ktime_get_tai_ns (forced, so
// on every kernel): all in Go, the reflector's log saying so once.
func TestSeedControllerXDP(t *testing.T) {
	t.Run("xdp", func(t *testing.T) {
		requireProgram(t, bpf.ReflectorNeeds, 0)
		runSeedController(t, "xdp")
	})
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns") // the processes inherit it
		runSeedController(t, "auto")
	})
}

// runSeedController runs the seed's client against two linerate
// processes; offloadMode set puts the reflector on an xdp port with that
// offload key.
func runSeedController(t *testing.T, offloadMode string) {
	xdp := offloadMode != ""
	began := float64(time.Now().UnixNano()) / 1e9
	testenv.RequireRoot(t)
	goBin := testenv.RequireCmd(t, "go")
	testenv.RequireCmd(t, "ip")
	err := exec.Command(python, "-c", "import grpc, grpc_tools.protoc").Run()
	testenv.Require(t, "python3-grpcio and python3-grpc-tools", err == nil)

	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "linerate")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/linerate/linerate/appliance/cmd/linerate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	gen := filepath.Join(dir, "gen")
	if err := os.Mkdir(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	protos, _ := filepath.Glob(filepath.Join(root, "plugins/stamp/api/srv6pm/*.proto"))
	args := []string{"-m", "grpc_tools.protoc", "-I", root, "--python_out=" + gen, "--grpc_python_out=" + gen}
	for _, p := range protos {
		rel, _ := filepath.Rel(root, p)
		args = append(args, rel)
	}
	cmd := exec.Command(python, args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("grpc_tools.protoc: %v: %s", err, out)
	}

	ns := netns.New(t)
	netns.Veth(t, ns, "lrpa", ns, "lrpb")
	ma, mb := ns.MAC(t, "lrpa"), ns.MAC(t, "lrpb")
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keys, "site-a"), []byte(strings.Repeat("c3", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	const sAddr, rAddr = "2001:db8:a::2", "2001:db8:b::2"
	sSock, rSock := filepath.Join(dir, "sender.sock"), filepath.Join(dir, "reflector.sock")
	senderCfg := fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = "unix:%s"
[[ports]]
name = "s0"
driver = "afpacket"
interface = "lrpa"
[[pipelines]]
name = "sender"
rx = ["s0"]
[[pipelines.stages]]
kind = "stamp.collector"
[[pipelines.stages]]
kind = "stamp.sender"
src_mac = %q
dst_mac = %q
key_dir = %q
[[pipelines.stages]]
kind = "forward"
port = "s0"
`, sSock, net.HardwareAddr(ma[:]), net.HardwareAddr(mb[:]), keys)
	port, offload := `driver = "afpacket"`, ""
	if xdp {
		// The sender's end takes the frames the reflector's program sends
		// back (XDP_TX) with an XDP program of its own.
		ns.PassXDP(t, "lrpa")
		testenv.RequireKernel(t, kernel.XSKMap, kernel.Loop) // every xdp port's
		port = "driver = \"xdp\"\n[[ports.match]]\nnext_header = 17\nudp_dst_port = 862"
		offload = fmt.Sprintf("offload = %q", offloadMode)
	}
	reflectorCfg := fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = "unix:%s"
[[ports]]
name = "r0"
interface = "lrpb"
%s
[[pipelines]]
name = "reflector"
rx = ["r0"]
[[pipelines.stages]]
kind = "stamp.reflector"
name = "refl"
addresses = [%q]
key_dir = %q
forward = "in"
%s
`, rSock, port, rAddr, keys, offload)
	start := func(name, cfg, sock string) *testenv.Output {
		path := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		out := &testenv.Output{}
		p := exec.Command("ip", "netns", "exec", ns.Name(), bin, "run", "-c", path, "--live=false", "--log-level", "info")
		p.Stdout, p.Stderr = out, out
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- p.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = p.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("%s process output:\n%s", name, out.String())
			}
		})
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(sock); err == nil {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no control socket: %s", name, out.String())
			}
		}
	}
	start("sender", senderCfg, sSock)
	rOut := start("reflector", reflectorCfg, rSock)
	if xdp {
		// auto falls back to Go with one line saying why; xdp says nothing.
		want := 0
		if offloadMode == "auto" {
			want = 1
		}
		// The fallback is logged before "running": once that is in, so is it.
		waitFor(t, "msg=running in the reflector's log", func() bool { return strings.Contains(rOut.String(), "msg=running") })
		if n := strings.Count(rOut.String(), "stage runs in Go"); n != want ||
			want == 1 && !strings.Contains(rOut.String(), "bpf_ktime_get_tai_ns") {
			t.Errorf("the reflector logged %d fallbacks, want %d:\n%s", n, want, rOut.String())
		}
	}

	cl := exec.Command(python, "testdata/seed_client.py", gen, sSock, rSock, sAddr, rAddr, "site-a", "50000")
	out, err := cl.Output()
	if err != nil {
		t.Fatalf("seed client: %v: %s", err, stderrOf(err))
	}
	var res struct {
		Status   map[string]string `json:"status"`
		Counters map[string]int    `json:"counters"`
		Results  map[string][]struct {
			SSID           uint32
			T1, T2, T3, T4 float64
		} `json:"results"`
		Running map[string][]struct {
			SSID           uint32
			T1, T2, T3, T4 float64
		} `json:"results_running"`
		After1 int `json:"results_after_drain_1"`
		After2 int `json:"results_after_drain_2"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, st := range res.Status {
		want := "STATUS_CODE_SUCCESS"
		switch {
		case strings.HasSuffix(name, ".params"):
			t.Logf("%s: %s", name, st)
			continue
		case name == "sender.Destroy.again":
			want = "STATUS_CODE_SESSION_NOT_FOUND"
		}
		if st != want {
			t.Errorf("%s: %s, want %s", name, st, want)
		}
	}
	for _, ssid := range []string{"1", "2"} {
		rs := res.Results[ssid]
		if len(res.Running[ssid]) < 1 || len(res.Running[ssid])+len(rs) < 3 || res.Counters[ssid] != len(rs) {
			t.Errorf("session %s: %d results while running, %d after Stop (the counter said %d)", ssid,
				len(res.Running[ssid]), len(rs), res.Counters[ssid])
		}
		now := float64(time.Now().UnixNano()) / 1e9
		for i, r := range append(res.Running[ssid], rs...) {
			// One clock on both sides: T1 < T2 ≤ T3 < T4, all within this
			// test's run (a millisecond either side for the float seconds
			// and the engines' wall offsets), however long a loaded machine
			// made it.
			if !(r.T1 < r.T2 && r.T2 <= r.T3 && r.T3 < r.T4) || r.T1 < began-1e-3 || r.T4 > now+1e-3 {
				t.Errorf("session %s result %d: T1..T4 %.9f %.9f %.9f %.9f", ssid, i, r.T1, r.T2, r.T3, r.T4)
			}
		}
	}
	if res.After1 != 0 || res.After2 != 0 {
		t.Errorf("results after draining: %d, %d", res.After1, res.After2)
	}
	if xdp {
		// The reflector's counters: some in the kernel, the authenticated
		// session's in Go.
		out, err := exec.Command(bin, "status", "--control", "unix:"+rSock, "--json", "--stats").Output()
		if err != nil {
			t.Fatalf("linerate status: %v: %s", err, stderrOf(err))
		}
		var st struct {
			Stats struct {
				Stages []struct {
					Name     string `json:"name"`
					Counters []struct {
						Name  string `json:"name"`
						Value string `json:"value"`
					} `json:"counters"`
				} `json:"stages"`
			} `json:"stats"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		c := map[string]int{}
		for _, sg := range st.Stats.Stages {
			if sg.Name == "refl" {
				for _, v := range sg.Counters {
					n, _ := strconv.Atoi(v.Value)
					c[v.Name] += n
				}
			}
		}
		t.Logf("reflector counters %v", c)
		if offloadMode == "xdp" && (c["reflected"] <= c["xdp_to_go"] || c["xdp_to_go"] == 0) {
			t.Errorf("reflected %d, left to Go %d: want some of each in the kernel and in Go", c["reflected"], c["xdp_to_go"])
		}
		if offloadMode == "auto" && (c["reflected"] == 0 || c["xdp_to_go"] != 0) {
			t.Errorf("reflected %d, left to Go by the program %d: want all in Go", c["reflected"], c["xdp_to_go"])
		}
	}
}
