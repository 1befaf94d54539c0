package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// tail completes a document with a port and a pipeline, so that each case shows
// only what it is about.
const tail = `
[[ports]]
name = "p0"
driver = "mem"

[[pipelines]]
name = "main"
rx = ["p0"]
[[pipelines.stages]]
kind = "sink"
`

// parseErrorCases are documents Parse must refuse, with every error it must
// report, in order. The line numbers are the point.
var parseErrorCases = []struct {
	name string
	doc  string
	want []string
}{
	{
		name: "unknown top-level key",
		doc:  "verison = 1\n" + tail,
		want: []string{
			"t.toml: version: missing: the file must say version = 1",
			`t.toml:1: verison: unknown key (did you mean "version"?)`,
		},
	},
	{
		name: "unknown engine key",
		doc:  "version = 1\n[engine]\npol = \"busy\"\ngogc = 100\n" + tail,
		want: []string{`t.toml:3: engine.pol: unknown key (did you mean "poll"?)`},
	},
	{
		name: "unknown key in a later array element",
		doc: `version = 1
[[pools]]
name = "a"
[[pools]]
name = "b"
bufers = 10
` + tail,
		want: []string{`t.toml:6: pools[1].bufers: unknown key (did you mean "buffers"?)`},
	},
	{
		name: "wrong types",
		doc: `version = 1
[engine]
gogc = "400"
pin = "yes"
memory_limit = 1.5
[[pools]]
name = "a"
[[pools]]
name = "b"
buffers = "many"
[[ports]]
name = "p0"
driver = "mem"
[[pipelines]]
name = "main"
lcores = [1, "2"]
[[pipelines.stages]]
kind = "sink"
`,
		want: []string{
			`t.toml:3: engine.gogc: expected an integer, found string "400"`,
			`t.toml:4: engine.pin: expected a boolean, found string "yes"`,
			`t.toml:5: engine.memory_limit: expected a string such as "512MiB", found float 1.5`,
			`t.toml:10: pools[1].buffers: expected an integer, found string "many"`,
			`t.toml:16: pipelines[0].lcores[1]: expected an integer, found string "2"`,
		},
	},
	{
		name: "tables where arrays belong and the reverse",
		doc:  "version = 1\nengine = 5\npools = { name = \"x\" }\n" + tail,
		want: []string{
			"t.toml:2: engine: expected a table, found integer 5",
			"t.toml:3: pools: expected an array, found table",
		},
	},
	{
		name: "inline stage tables",
		doc: `version = 1
[[ports]]
name = "p0"
driver = "mem"
[[pipelines]]
name = "main"
stages = [
  { kind = "counter" },
  { name = "x" },
  { kind = "sink", name = "x" },
  { kind = "sink", name = "x" },
]
`,
		want: []string{
			"t.toml:9: pipelines[0].stages[1].kind: missing: every stage needs a kind, e.g. kind = \"forward\"",
			`t.toml:11: pipelines[0].stages[3].name: "x" is already used by pipelines[0].stages[2]`,
		},
	},
	{
		name: "comments and multi-line strings do not move lines",
		doc: `version = 1
# [[ports]]
# mtu = 1
[[ports]]
name = "p0"
driver = "mem"
description = """
[[pipelines]]
mtu = 2 # "
"""
note = '''
'''
mtu = 3
[[pipelines]]
name = "main"
rx = ["p0"]
[[pipelines.stages]]
kind = "sink"
`,
		want: []string{"t.toml:13: ports[0].mtu: 3: want 68 to 9216"},
	},
	{
		name: "engine values",
		doc: `version = 2
[engine]
poll = "fast"
gogc = 0
tx_buffer = 8
ring_size = 1000
control_cpus = [0, 0, -1]
[control]
listen = "0.0.0.0:50051"
[metrics]
listen = "9087"
` + tail,
		want: []string{
			"t.toml:1: version: version 2 is not supported; this linerate reads version 1",
			`t.toml:3: engine.poll: must be "busy" or "adaptive", not "fast"`,
			"t.toml:4: engine.gogc: 0: want a percentage above 0, or -1 to turn the collector off",
			"t.toml:5: engine.tx_buffer: 8 packets: want 64 (a burst) to 1048576",
			"t.toml:6: engine.ring_size: 1000: want a power of two from 64 to 16777216",
			"t.toml:7: engine.control_cpus[1]: CPU 0 is listed twice",
			"t.toml:7: engine.control_cpus[2]: CPU -1 is negative",
			`t.toml:9: control.listen: "0.0.0.0:50051": the control API listens only on a unix socket or a loopback address, as it has no authentication`,
			`t.toml:11: metrics.listen: "9087" is neither "unix:/path" nor "host:port"`,
		},
	},
	{
		name: "pools and ports",
		doc: `version = 1
[[pools]]
name = "small"
buffers = 0
data_room = 1024
headroom = 100
[[ports]]
name = "p0"
driver = "mem"
pool = "small"
[[ports]]
name = "p0"
driver = "mem"
pool = "big"
[[ports]]
name = "p:2"
rx_queues = 0
mtu = 10000
[[pipelines]]
name = "main"
[[pipelines.stages]]
kind = "sink"
`,
		want: []string{
			"t.toml:4: pools[0].buffers: 0: a pool needs at least one buffer",
			"t.toml:6: pools[0].headroom: 100 bytes: want at least 320, the room IOAM needs to grow a packet in place",
			`t.toml:7: ports[0].mtu: 1500 needs data_room ≥ 1522 (MTU + 22 for Ethernet, VLAN tags and FCS); pool "small" has 1024`,
			`t.toml:12: ports[1].name: "p0" is already used by ports[0]`,
			`t.toml:14: ports[1].pool: no pool "big" (declared: "small", "default")`,
			`t.toml:15: ports[2].driver: missing: name the datapath, e.g. driver = "afpacket"`,
			`t.toml:16: ports[2].name: "p:2": use letters, digits, '_', '-' and '.' only`,
			"t.toml:17: ports[2].rx_queues: 0: want 1 to 1024",
			"t.toml:18: ports[2].mtu: 10000: want 68 to 9216",
		},
	},
	{
		name: "pipelines",
		doc: `version = 1
[[ports]]
name = "p0"
driver = "mem"
rx_queues = 2
[[pipelines]]
name = "a"
lcores = [1, 1]
rx = ["p0:1", "p1", "p0:2", "p0:x"]
[[pipelines]]
name = "b"
rx = [
  "p0",
]
`,
		want: []string{
			"t.toml:6: pipelines[0]: has no stages: add [[pipelines.stages]] tables, each with a kind",
			"t.toml:8: pipelines[0].lcores[1]: CPU 1 is listed twice; each entry runs one instance of the chain",
			`t.toml:9: pipelines[0].rx[1]: no port "p1"`,
			`t.toml:9: pipelines[0].rx[2]: port "p0" has 2 rx queue(s), numbered from 0; there is no queue 2`,
			`t.toml:9: pipelines[0].rx[3]: "p0:x": queue "x" is not a number ≥ 0`,
			"t.toml:10: pipelines[1]: has no stages: add [[pipelines.stages]] tables, each with a kind",
			"t.toml:13: pipelines[1].rx[0]: rx queue p0:1 is already polled by pipelines[0].rx[0]; a queue belongs to one pipeline",
		},
	},
	{
		name: "no pipelines",
		doc:  "version = 1\n",
		want: []string{"t.toml: pipelines: none declared: add a [[pipelines]] table with its [[pipelines.stages]]"},
	},
	{
		name: "explicit zero is not a default",
		doc:  "version = 1\n[engine]\ntx_buffer = 0\n" + tail,
		want: []string{"t.toml:3: engine.tx_buffer: 0 packets: want 64 (a burst) to 1048576"},
	},
	{
		name: "syntax error",
		doc:  "version = 1\n[engine]\npoll = busy\n",
		want: []string{`t.toml:3: engine.poll: expected value but found "busy" instead`},
	},
}

func TestParseErrors(t *testing.T) {
	for _, c := range parseErrorCases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("t.toml", []byte(c.doc))
			if err == nil {
				t.Fatalf("Parse accepted the document")
			}
			if f != nil {
				t.Errorf("Parse returned a File with an error")
			}
			got := strings.Split(err.Error(), "\n")
			if !slices.Equal(got, c.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			var es Errors
			if !errors.As(err, &es) || len(es) != len(got) {
				t.Fatalf("error is not Errors with one entry per line: %T", err)
			}
			var e *Error
			if !errors.As(err, &e) || e != es[0] {
				t.Errorf("errors.As does not reach the first *Error")
			}
		})
	}
}

func TestLab(t *testing.T) {
	f, err := LoadLab()
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != LabName || f.Version != 1 {
		t.Errorf("path %q version %d", f.Path, f.Version)
	}
	if f.Engine.Poll != "adaptive" || f.Engine.PinLcores() || f.Engine.GOGC != 400 || f.Engine.TxBuffer != 256 || f.Engine.RingSize != 1024 {
		t.Errorf("engine %+v", f.Engine)
	}
	if f.Control.Listen != "unix:/run/linerate/linerate.sock" || f.Metrics.Listen != "" {
		t.Errorf("control %q metrics %q", f.Control.Listen, f.Metrics.Listen)
	}
	if len(f.Pools) != 1 || f.Pools[0].Name != "default" || f.Pools[0].Buffers != 65536 ||
		f.Pools[0].DataRoom != 2048 || f.Pools[0].Headroom != 320 {
		t.Errorf("pools %+v", f.Pools)
	}

	type memPort struct {
		Peer string `toml:"peer"`
	}
	wantPorts := []struct{ name, driver, peer string }{{"m0", "mem", "m1"}, {"m1", "mem", "m0"}, {"null0", "null", ""},
		{"rl0", "mem", "rl1"}, {"rl1", "mem", "rl0"}, {"rl2", "mem", "rl3"}, {"rl3", "mem", "rl2"}, // rl*: the RLNC path
		{"st0", "mem", "st1"}, {"st1", "mem", "st0"}} // st*: the STAMP path
	if len(f.Ports) != len(wantPorts) {
		t.Fatalf("%d ports", len(f.Ports))
	}
	for i, w := range wantPorts {
		p := f.Ports[i]
		var m memPort
		if err := p.Decode(&m); err != nil {
			t.Errorf("port %s: %v", p.Name, err)
		}
		if p.Name != w.name || p.Driver != w.driver || m.Peer != w.peer || p.Pool != "default" || p.RxQueues != 1 || p.MTU != 1500 {
			t.Errorf("port %d: %+v peer %q", i, p, m.Peer)
		}
		if !strings.HasPrefix(p.Where(), LabName+":") {
			t.Errorf("port %s: Where() = %q", p.Name, p.Where())
		}
	}

	if len(f.Pipelines) != 7 { // source, lab, the RLNC path's rlnc-source, rlnc-relay, rlnc-dest, the STAMP path's stamp-sender, stamp-reflector
		t.Fatalf("%d pipelines", len(f.Pipelines))
	}
	src, lab := f.Pipelines[0], f.Pipelines[1]
	kinds := func(p Pipeline) (out []string) {
		for _, s := range p.Stages {
			out = append(out, s.Kind+"/"+s.Name)
		}
		return out
	}
	if src.Name != "source" || !slices.Equal(src.CPUs, []int{1}) || len(src.Rx) != 0 ||
		!slices.Equal(kinds(src), []string{"generator/generator#0", "ioam.encap/ioam-encap", "ioam.transit/ioam-transit-a", "link/link#3", "forward/forward#4"}) {
		t.Errorf("source: %+v %v", src, kinds(src))
	}
	if lab.Name != "lab" || !slices.Equal(lab.CPUs, []int{1}) || !slices.Equal(lab.Rx, []string{"m1"}) ||
		!slices.Equal(kinds(lab), []string{"counter/ingress", "ioam.transit/ioam-transit-b", "ioam.decap/ioam-decap", "sink/sink"}) {
		t.Errorf("lab: %+v %v", lab, kinds(lab))
	}

	// The stages' keys, decoded strictly into the types the stages will use.
	var gen struct {
		Flows      int        `toml:"flows"`
		IPVersion  int        `toml:"ip_version"`
		Src        Addr       `toml:"src"`
		Dst        Addr       `toml:"dst"`
		SrcMAC     MAC        `toml:"src_mac"`
		DstMAC     MAC        `toml:"dst_mac"`
		UDPSrcPort uint16     `toml:"udp_src_port"`
		UDPDstPort uint16     `toml:"udp_dst_port"`
		Sizes      []int      `toml:"sizes"`
		Rate       PacketRate `toml:"rate"`
		Pool       string     `toml:"pool"`
	}
	if err := src.Stages[0].Decode(&gen); err != nil {
		t.Fatal(err)
	}
	if gen.Flows != 4 || gen.IPVersion != 6 || gen.Src.Addr != netip.MustParseAddr("2001:db8:1::1") ||
		gen.Dst.Addr != netip.MustParseAddr("2001:db8:2::1") || gen.SrcMAC != (MAC{2, 0, 0, 0, 0, 1}) ||
		gen.DstMAC != (MAC{2, 0, 0, 0, 0, 2}) || gen.UDPSrcPort != 10000 || gen.UDPDstPort != 20000 ||
		!slices.Equal(gen.Sizes, []int{128, 512, 1500}) || gen.Rate != 200_000 || gen.Pool != "default" {
		t.Errorf("generator: %+v", gen)
	}
	var link struct {
		Delay     Duration `toml:"delay"`
		Jitter    Duration `toml:"jitter"`
		Loss      float64  `toml:"loss"`
		Seed      uint64   `toml:"seed"`
		KeepOrder bool     `toml:"keep_order"`
		Queue     int      `toml:"queue"`
		Rate      Rate     `toml:"rate"`
	}
	if err := src.Stages[3].Decode(&link); err != nil {
		t.Fatal(err)
	}
	if link.Delay.String() != "1ms" || link.Jitter.String() != "100us" || link.Loss != 0.005 ||
		link.Seed != 1 || !link.KeepOrder || link.Queue != 65536 || link.Rate != 0 {
		t.Errorf("link: %+v", link)
	}
	var fwd struct {
		Port    string `toml:"port"`
		SwapMAC bool   `toml:"swap_mac"`
	}
	if err := src.Stages[4].Decode(&fwd); err != nil || fwd.Port != "m0" || fwd.SwapMAC {
		t.Errorf("forward: %+v %v", fwd, err)
	}
	for _, s := range []Stage{lab.Stages[0], lab.Stages[3]} { // counter and sink; the IOAM stages are the plugin's to check
		if err := s.Decode(&struct{}{}); err != nil {
			t.Errorf("%s has keys of its own: %v", s.Kind, err)
		}
	}

	b := Lab()
	b[0] = 'X'
	if Lab()[0] == 'X' {
		t.Error("Lab returns the embedded bytes themselves")
	}
}

// stageDoc has a misspelt key in the second stage of the first pipeline and a
// correct one, with the same name, in the second pipeline.
const stageDoc = `version = 1
[[ports]]
name = "p0"
driver = "mem"
rx_queue = 2

[[pipelines]]
name = "a"
rx = ["p0"]
[[pipelines.stages]]
kind = "counter"
[[pipelines.stages]]
kind = "link"
delya = "1ms"    # misspelt
jitter = 5
[pipelines.stages.match]
protocol = 17
protcol = 6

[[pipelines]]
name = "b"
stages = [{ kind = "link", delay = "2ms", delya = "3ms" }]
`

type linkConfig struct {
	Delay  Duration `toml:"delay"`
	Jitter Duration `toml:"jitter"`
	Match  struct {
		Protocol uint8 `toml:"protocol"`
	} `toml:"match"`
}

func TestStageDecodeErrors(t *testing.T) {
	f, err := Parse("s.toml", []byte(stageDoc))
	if err != nil {
		t.Fatal(err)
	}
	st := f.Pipelines[0].Stages[1]
	if st.Where() != "s.toml:12" || st.Path() != "pipelines[0].stages[1]" {
		t.Errorf("Where %q Path %q", st.Where(), st.Path())
	}
	want := strings.Join([]string{
		`s.toml:14: pipelines[0].stages[1].delya: unknown key (did you mean "delay"?)`,
		`s.toml:15: pipelines[0].stages[1].jitter: expected a string such as "1ms", found integer 5`,
		`s.toml:18: pipelines[0].stages[1].match.protcol: unknown key (did you mean "protocol"?)`,
	}, "\n")
	// Once per lcore: every call gives the same answer.
	for range 3 {
		var c linkConfig
		err := st.Decode(&c)
		if err == nil || err.Error() != want {
			t.Fatalf("got:\n%v\nwant:\n%s", err, want)
		}
		if c.Match.Protocol != 17 {
			t.Errorf("protocol %d", c.Match.Protocol)
		}
	}

	var c linkConfig
	err = f.Pipelines[1].Stages[0].Decode(&c)
	wantInline := `s.toml:22: pipelines[1].stages[0].delya: unknown key (did you mean "delay"?)`
	if err == nil || err.Error() != wantInline {
		t.Errorf("inline stage: got %v, want %s", err, wantInline)
	}
	if c.Delay.String() != "2ms" {
		t.Errorf("inline stage delay %v", c.Delay)
	}

	// A misspelt common key lands in the driver's table; the driver's Decode
	// reports it and suggests the common key.
	var mem struct {
		Peer string `toml:"peer"`
	}
	err = f.Ports[0].Decode(&mem)
	wantPort := `s.toml:5: ports[0].rx_queue: unknown key (did you mean "rx_queues"?)`
	if err == nil || err.Error() != wantPort {
		t.Errorf("port: got %v, want %s", err, wantPort)
	}
}

func TestDecodeConcurrent(t *testing.T) {
	f, err := Parse("s.toml", []byte(stageDoc))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]string, 8)
	for i := range errs {
		wg.Go(func() {
			var c linkConfig
			errs[i] = f.Pipelines[0].Stages[1].Decode(&c).Error()
		})
	}
	wg.Wait()
	for _, e := range errs[1:] {
		if e != errs[0] {
			t.Fatalf("concurrent Decode differs:\n%s\n%s", e, errs[0])
		}
	}
}

func TestDecodeInto(t *testing.T) {
	tab, err := ParseTable("x.toml", []byte(`
name = "n"
Count = 3
sizes = [1, 2]
limits = { a = 1, b = 2 }
opts = { deep = [1, { k = "v" }] }
neg = -1
when = 1979-05-27T07:32:00Z
[sub]
x = 1
`))
	if err != nil {
		t.Fatal(err)
	}
	type inner struct{ X int }
	var v struct {
		Name   string         `toml:"name"`
		Count  int            // untagged: any case
		Sizes  [2]int         `toml:"sizes"`
		Limits map[string]int `toml:"limits"`
		Opts   any            `toml:"opts"`
		Neg    uint           `toml:"neg"`
		When   string         `toml:"when"`
		Sub    Table          `toml:"sub"`
	}
	err = tab.Decode(&v)
	want := strings.Join([]string{
		"x.toml:7: neg: -1 is negative",
		"x.toml:8: when: expected a string, found date-time",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	if v.Name != "n" || v.Count != 3 || v.Sizes != [2]int{1, 2} || v.Limits["b"] != 2 || len(v.Limits) != 2 {
		t.Errorf("%+v", v)
	}
	var sub inner
	if err := v.Sub.Decode(&sub); err != nil || sub.X != 1 || v.Sub.Where() != "x.toml:9" {
		t.Errorf("sub: %+v %v %s", sub, err, v.Sub.Where())
	}

	// Values in an interface{} are copies: changing them does not change the
	// next Decode.
	v.Opts.(map[string]any)["deep"].([]any)[1].(map[string]any)["k"] = "changed"
	var again struct {
		Opts any `toml:"opts"`
	}
	var m map[string]any
	_ = tab.Decode(&m)
	_ = tab.Decode(&again)
	if got := again.Opts.(map[string]any)["deep"].([]any)[1].(map[string]any)["k"]; got != "v" {
		t.Errorf("a second Decode saw %v", got)
	}
	if len(m) != 8 {
		t.Errorf("map decode: %d keys", len(m))
	}

	if err := tab.Decode(v); err == nil {
		t.Error("Decode into a non-pointer succeeded")
	}
	if err := (Table{}).Decode(&v); err != nil {
		t.Errorf("zero Table: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	f, err := Parse("d.toml", []byte(`version = 1
[control]
listen = ""
[[ports]]
name = "p0"
driver = "afpacket"
[[pipelines]]
name = "main"
rx = ["p0:0"]
[[pipelines.stages]]
kind = "forward"
[[pipelines.stages]]
kind = "sink"
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Control.Listen != "" {
		t.Errorf(`listen = "" should disable the control API, got %q`, f.Control.Listen)
	}
	if !f.Engine.PinLcores() || f.Engine.Poll != "adaptive" || f.Engine.GOGC != 400 || f.Engine.MemoryLimit != 0 {
		t.Errorf("engine %+v", f.Engine)
	}
	p, ok := f.Pool("default")
	if !ok || p.Buffers != 16384 || p.DataRoom != 2048 || p.Headroom != 320 {
		t.Errorf("default pool %+v %v", p, ok)
	}
	port := f.Ports[0]
	if port.Pool != "default" || port.RxQueues != 1 || port.TxQueues != 0 || port.MTU != 1500 {
		t.Errorf("port %+v", port)
	}
	if f.Pipelines[0].Stages[0].Name != "forward#0" || f.Pipelines[0].Stages[1].Name != "sink#1" {
		t.Errorf("stage names %q %q", f.Pipelines[0].Stages[0].Name, f.Pipelines[0].Stages[1].Name)
	}

	// A File built in code: zero values are defaults, and Validate works
	// without a document behind it.
	code := &File{Path: "code", Version: 1,
		Ports:     []Port{{Name: "p0", Driver: "mem"}},
		Pipelines: []Pipeline{{Name: "x", Rx: []string{"p0"}, Stages: []Stage{{Kind: "sink"}}}},
	}
	code.Defaults()
	code.Defaults() // idempotent
	if err := code.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(code.Pools) != 1 || code.Control.Listen != defaultControlListen || code.Pipelines[0].Stages[0].Name != "sink#0" {
		t.Errorf("%+v", code)
	}
	code.Ports[0].MTU = 9000
	err = code.Validate()
	want := `code: ports[0].mtu: 9000 needs data_room ≥ 9022 (MTU + 22 for Ethernet, VLAN tags and FCS); pool "default" has 2048`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestParseRx(t *testing.T) {
	for _, c := range []struct {
		in   string
		want RxRef
		err  bool
	}{
		{"m1", RxRef{"m1", -1}, false},
		{"m1:0", RxRef{"m1", 0}, false},
		{"m1:15", RxRef{"m1", 15}, false},
		{":1", RxRef{}, true},
		{"m1:", RxRef{}, true},
		{"m1:-1", RxRef{}, true},
		{"m1:a", RxRef{}, true},
	} {
		got, err := ParseRx(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseRx(%q) = %v, %v", c.in, got, err)
		}
		if err == nil && got.String() != c.in {
			t.Errorf("%q round-trips as %q", c.in, got.String())
		}
	}
}

func TestLoad(t *testing.T) {
	path := t.TempDir() + "/lab.toml"
	if err := os.WriteFile(path, Lab(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil || f.Path != path {
		t.Fatalf("%v %v", f, err)
	}
	if _, err := Load(path + ".missing"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// An old key name still works, with a warning that names its place; the old
// and the new name together are an error.
func TestRenamedKeys(t *testing.T) {
	doc := "version = 1\n[[pipelines]]\nname = \"p\"\n%s\n[[pipelines.stages]]\nkind = \"sink\"\n"
	f, err := Parse("t.toml", []byte(fmt.Sprintf(doc, "lcores = [1, 2]")))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Pipelines[0].CPUs, []int{1, 2}) {
		t.Errorf("cpus %v, want [1 2] from lcores", f.Pipelines[0].CPUs)
	}
	if w := f.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "t.toml:4: pipelines[0].lcores: renamed cpus") {
		t.Errorf("warnings %q", w)
	}
	f, err = Parse("t.toml", []byte(fmt.Sprintf(doc, "cpus = [1]")))
	if err != nil || len(f.Warnings()) != 0 || !slices.Equal(f.Pipelines[0].CPUs, []int{1}) {
		t.Errorf("cpus: %v, warnings %q", err, f.Warnings())
	}
	_, err = Parse("t.toml", []byte(fmt.Sprintf(doc, "cpus = [1]\nlcores = [2]")))
	if err == nil || !strings.Contains(err.Error(), "t.toml:5: pipelines[0].lcores: the old name of cpus, which is set too") {
		t.Errorf("both names: %v", err)
	}
}
