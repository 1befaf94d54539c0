package external_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/external"
)

// thirdParty is a plugin as a user writes it from the SDK docs, in a module
// of its own: it drops packets of odd length with a reason of its own,
// forwards the rest, and, with hang_after, stops answering after that many
// packets.
const thirdParty = `package main

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/sdk"
)

var reasonOdd = packet.RegisterReason("odd_length")

// seen is what the plugin's own service reports: packets its instances saw.
var seen atomic.Uint64

// countService is the plugin's own control service, example.evens.Evens.
var countService = grpc.ServiceDesc{
	ServiceName: "example.evens.Evens",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Count", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(&emptypb.Empty{}); err != nil {
			return nil, err
		}
		return wrapperspb.UInt64(seen.Load()), nil
	}}},
}

type stage struct {
	port     uint16
	n, after uint64
}

func (s *stage) Process(ctx *plugins.Context, b *packet.Burst) {
	seen.Add(uint64(b.N))
	for i := 0; i < b.N; i++ {
		s.n++
		if s.after > 0 && s.n > s.after {
			time.Sleep(time.Hour)
		}
		p := b.H[i].P()
		if p.Len()%2 == 1 {
			p.Drop(reasonOdd)
			continue
		}
		p.Forward(s.port)
	}
}

func main() {
	sdk.Serve(plugins.Kind{Name: "evens", Summary: "forward frames of even length", New: func(s *plugins.Setup) (plugins.Stage, error) {
		var c struct {
			Port      string ` + "`toml:\"port\"`" + `
			HangAfter uint64 ` + "`toml:\"hang_after\"`" + `
		}
		if err := s.Config.Decode(&c); err != nil {
			return nil, err
		}
		p, ok := s.Ports.Port(c.Port)
		if !ok {
			return nil, &portError{c.Port}
		}
		return &stage{port: p.ID, after: c.HangAfter}, nil
	}}, sdk.Service(&countService, struct{}{}))
}

type portError struct{ name string }

func (e *portError) Error() string { return "port " + e.name + ": no such port" }
`

// buildThirdParty builds thirdParty in a temporary module that requires
// linerate by its module path (replaced by this tree) and imports its public
// packages only.
func buildThirdParty(t *testing.T) string {
	t.Helper()
	goBin := testenv.RequireCmd(t, "go")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// linerate's own requirements, so the build needs no module download.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := string(gomod)
	reqs = reqs[strings.Index(reqs, "\nrequire"):]
	if i := strings.Index(reqs, "\ntool ("); i >= 0 {
		reqs = reqs[:i]
	}
	mod := "module example.com/evens\n\ngo 1.26.0\n" + reqs + "\nrequire github.com/linerate/linerate v0.0.0\n\nreplace github.com/linerate/linerate => " + root + "\n"
	for name, body := range map[string]string{"go.mod": mod, "main.go": thirdParty} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(trustedTree(t), "evens")
	for _, args := range [][]string{{"build", "-o", bin, "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Only public packages: nothing of linerate's internal/.
	out, err := exec.Command(goBin, "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "linerate/internal") {
		t.Errorf("the plugin links linerate's internal packages:\n%s", out)
	}
	return bin
}

func evensConfig(bin, extra string) string {
	c := config(bin, 0, "50kpps", extra)
	c = strings.Replace(c, "sizes = [64, 128, 1518]", "sizes = [64, 127, 1518]", 1)
	return strings.Replace(c, "config = { every = 10 }", `config = { port = "m0" }`, 1)
}

// TestThirdPartyPlugin: a plugin built from the SDK in its own module runs as
// an external stage; its verdicts (forward, drop with its own reason) apply,
// and its own gRPC service answers at linerate's control address.
func TestThirdPartyPlugin(t *testing.T) {
	bin := buildThirdParty(t)
	e := enginetest.Start(t, evensConfig(bin, ""), appliance.Options{})
	counter := func(stage, name string) uint64 { return enginetest.Counter(e.Snapshot(), stage, name) }
	waitFor(t, "forwarded and dropped", time.Minute, func() bool {
		return counter("sampler", "forwarded") > 1000 && stageDrops(e.Snapshot(), "sampler", "odd_length") > 100
	})
	// The plugin's own service, through linerate's control API.
	cc := enginetest.Dial(t, e)
	var n wrapperspb.UInt64Value
	if err := cc.Invoke(context.Background(), "/example.evens.Evens/Count", &emptypb.Empty{}, &n); err != nil || n.Value == 0 {
		t.Errorf("the plugin's Count through linerate: %v, %d", err, n.Value)
	}
	err := cc.Invoke(context.Background(), "/example.nothing.Nothing/Count", &emptypb.Empty{}, &n)
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("an unknown service: %v", err)
	}
	// The plugin serves it on the connection of go-plugin's GRPCBroker that
	// linerate dialled, not on go-plugin's own, which carries StagePlugin.
	main, brokered := external.PluginConns("sampler")
	if main == nil || brokered == nil || main == brokered {
		t.Fatalf("go-plugin's connection %p, the broker's %p", main, brokered)
	}
	if err := brokered.Invoke(context.Background(), "/example.evens.Evens/Count", &emptypb.Empty{}, &n); err != nil {
		t.Errorf("Count on the broker's connection: %v", err)
	}
	if err := main.Invoke(context.Background(), "/example.evens.Evens/Count", &emptypb.Empty{}, &n); status.Code(err) != codes.Unimplemented {
		t.Errorf("Count on go-plugin's connection: %v, want Unimplemented", err)
	}
	e.Stop()
	s := e.Snapshot()
	fw, dr := enginetest.Counter(s, "sampler", "forwarded"), enginetest.Counter(s, "sampler", "dropped")
	// The plugin's drops are the stage's, by the plugin's reason: what the
	// DROPS column, the DROP REASON table and run --json's drops show.
	_, why := drops(s)
	if odd := stageDrops(s, "sampler", "odd_length"); odd != dr || why["odd_length"] != dr {
		t.Errorf("the plugin dropped %d: the stage's drops say odd_length %d, the totals %d", dr, odd, why["odd_length"])
	}
	// What the plugin forwarded reached the sink, or a full tx buffer or
	// mem ring on the way (a busy machine's, counted).
	lost := why["emit_full"] + why["tx_full"]
	if got := enginetest.Counter(s, "sink", "received"); got+lost != fw {
		t.Errorf("the plugin forwarded %d, the sink received %d, %d dropped on the way (%v)", fw, got, lost, why)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// TestHungPlugin: a plugin that stops answering with packets lent is killed
// after hang_timeout, reaped, counted lost, and restarted; packets meanwhile
// fail open (continue, here to the forward stage).
func TestHungPlugin(t *testing.T) {
	bin := buildThirdParty(t)
	cfg := evensConfig(bin, `fail = "open"`+"\n"+`hang_timeout = "300ms"`)
	cfg = strings.Replace(cfg, `config = { port = "m0" }`, `config = { port = "m0", hang_after = 5000 }`, 1)
	e := enginetest.Start(t, cfg, appliance.Options{})
	counter := func(stage, name string) uint64 { return enginetest.Counter(e.Snapshot(), stage, name) }
	waitFor(t, "the hung plugin counted lost", time.Minute, func() bool { return counter("sampler", "plugin_lost") >= 1 })
	waitFor(t, "reclaimed and restarted", time.Minute, func() bool {
		return counter("sampler", "reclaimed") > 0 && counter("sampler", "plugin_restarts") >= 1
	})
	e.Stop()
	s := e.Snapshot()
	sent := enginetest.Counter(s, "generator#0", "sent")
	got := enginetest.Counter(s, "sink", "received")
	dropped, why := drops(s) // the plugin's drops among them
	consumed := enginetest.Counter(s, "sampler", "consumed")
	if got+dropped+consumed != sent {
		t.Errorf("sent %d: received %d + dropped %d (%v) + consumed by the plugin %d", sent, got, dropped, why, consumed)
	}
	// Fail open: what passed while the plugin was stalled or down is counted.
	if n := enginetest.Counter(s, "sampler", "plugin_bypassed"); n == 0 {
		t.Error("no packet counted as plugin_bypassed")
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// readmeBlock is the first ```lang block of md after the line heading.
func readmeBlock(t *testing.T, md, heading, lang string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no %q in the README", heading)
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	if !ok {
		t.Fatalf("no %s block after %q", lang, heading)
	}
	block, _, _ := strings.Cut(rest, "```")
	return block
}

// TestReadmeModule builds plugins/sdk/README.md's example the README's way:
// a module of its own beside a checkout of linerate (../linerate), its go
// commands run as the README gives them (the require line and the replace,
// then go get and go build), its main.go the README's. Only the
// environment differs: no network (GOPROXY=off, GOSUMDB=off), so what go
// get resolves comes from this machine's module cache.
func TestReadmeModule(t *testing.T) {
	goBin := testenv.RequireCmd(t, "go")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "plugins/sdk/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## 1. The stage and its main"
	script := readmeBlock(t, string(b), heading, "sh")
	mainGo := readmeBlock(t, string(b), heading, "go")
	top := t.TempDir()
	if err := os.Symlink(root, filepath.Join(top, "linerate")); err != nil {
		t.Fatal(err)
	}
	dir := ""
	var cmds [][]string
	for _, line := range strings.Split(strings.ReplaceAll(script, "\\\n", " "), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "mkdir" && len(f) >= 2:
			dir = filepath.Join(top, f[1])
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		case f[0] == "go":
			cmds = append(cmds, f[1:])
		default:
			t.Fatalf("a README command the test does not know: %q", line)
		}
	}
	if dir == "" || len(cmds) < 4 {
		t.Fatalf("the README's commands: module dir %q, %d go commands", dir, len(cmds))
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainGo), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOFLAGS=")
	for _, args := range cmds {
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"github.com/linerate/linerate v0.0.0", "replace github.com/linerate/linerate => ../linerate"} {
		if !strings.Contains(string(mod), want) {
			t.Errorf("go.mod has no %q:\n%s", want, mod)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "evens")); err != nil {
		t.Errorf("no binary: %v", err)
	}
}

// stageDrops is the stage's drops by reason, over its instances.
func stageDrops(s *stats.Snapshot, stage, reason string) uint64 {
	var n uint64
	for _, st := range s.Stages {
		if st.Name != stage {
			continue
		}
		for _, d := range st.Drops {
			if d.Reason == reason {
				n += d.Count
			}
		}
	}
	return n
}

// TestChecksumRefused: a plugin whose sha256 differs from the config's does
// not run, and the error says why.
func TestChecksumRefused(t *testing.T) {
	bin := buildSampler(t)
	_, err := newEngine(t, config(bin, 0, "1kpps", `sha256 = "`+strings.Repeat("ab", 32)+`"`))
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("err = %v, want a checksum mismatch", err)
	}
	if pluginPID(t, bin) != 0 {
		t.Error("a plugin process is left")
	}
	// With its own checksum it runs.
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if _, err := newEngine(t, config(bin, 0, "1kpps", `sha256 = "`+hex.EncodeToString(sum[:])+`"`)); err != nil {
		t.Errorf("the right checksum: %v", err)
	}
}

// TestPluginConfigError: the plugin's own config error reaches the user with
// the stage table's place in the file.
func TestPluginConfigError(t *testing.T) {
	bin := buildSampler(t)
	_, err := newEngine(t, strings.Replace(config(bin, 0, "1kpps", ""), "every = 10", "evry = 10", 1))
	if err == nil || !strings.Contains(err.Error(), "test.toml:") || !strings.Contains(err.Error(), "evry") {
		t.Fatalf("err = %v, want the unknown key with file:line", err)
	}
}
