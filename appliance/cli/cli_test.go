package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/linerate/linerate/internal/testenv"
)

// linerateBin is the command built once for the tests that run it as a user would.
var linerateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "linerate-cli")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	linerateBin = filepath.Join(dir, "linerate")
	out, err := exec.Command("go", "build", "-o", linerateBin, "github.com/linerate/linerate/appliance/cmd/linerate").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build linerate: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	// A command that should end but runs on (a run that ignores its
	// arguments runs the lab forever) is killed, and its exit is -1.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, linerateBin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// TestValidateNamesLineAndKey: a misspelt key inside a stage table makes validate
// exit non-zero with the file, the line and the key.
func TestValidateNamesLineAndKey(t *testing.T) {
	cfg := `version = 1
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"

[[pipelines]]
name = "p"
lcores = [0]
rx = ["m0"]
[[pipelines.stages]]
kind = "link"
delya = "1ms"
[[pipelines.stages]]
kind = "forward"
port = "m0"
`
	path := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "validate", "-c", path)
	if code == 0 {
		t.Fatalf("validate accepted a misspelt key; stderr: %s", stderr)
	}
	for _, want := range []string{path + ":14:", "delya", "pipelines[0].stages[0]"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("validate's message %q lacks %q", stderr, want)
		}
	}
	// The same file with the key spelt right is fine.
	if err := os.WriteFile(path, []byte(strings.Replace(cfg, "delya", "delay", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runCLI(t, "validate", "-c", path); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("validate refused a good config (code %d): %s", code, stderr)
	}
}

func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"validate", "--help"}, {"config", "--help"},
		{"status", "--help"}, {"stages", "--help"}, {"help", "run"}} {
		out, errOut, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(out+errOut, "Usage") {
			t.Errorf("%v: exit %d, output %q", args, code, out+errOut)
		}
	}
	if out, _, code := runCLI(t, "version"); code != 0 || !strings.HasPrefix(out, "linerate ") {
		t.Errorf("version: %d %q", code, out)
	}
	if out, _, code := runCLI(t, "config", "default"); code != 0 || !strings.Contains(out, "version = 1") {
		t.Errorf("config default: %d", code)
	}
	if _, _, code := runCLI(t, "frobnicate"); code != 2 {
		t.Errorf("an unknown command exits %d, want 2", code)
	}
}

// frames builds Ethernet frames of every kind the copy must keep: IPv6 UDP,
// IPv4 UDP, VLAN-tagged, QinQ, and jumbo.
func frames(t *testing.T) [][]byte {
	t.Helper()
	src, _ := net.ParseMAC("02:00:00:00:00:01")
	dst, _ := net.ParseMAC("02:00:00:00:00:02")
	var out [][]byte
	ser := func(ls ...gopacket.SerializableLayer) {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), buf.Bytes()...))
	}
	payload := func(n int) gopacket.Payload {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		return p
	}
	for i, size := range []int{18, 200, 1400, 8950} {
		ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: 64,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		u := &layers.UDP{SrcPort: layers.UDPPort(1000 + i), DstPort: 2000}
		_ = u.SetNetworkLayerForChecksum(ip6)
		ser(&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv6}, ip6, u, payload(size))

		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IPv4(192, 0, 2, 1), DstIP: net.IPv4(198, 51, 100, 1)}
		u4 := &layers.UDP{SrcPort: layers.UDPPort(3000 + i), DstPort: 4000}
		_ = u4.SetNetworkLayerForChecksum(ip4)
		ser(&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: uint16(100 + i), Type: layers.EthernetTypeIPv4}, ip4, u4, payload(size))
		ser(&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeQinQ},
			&layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: 20, Type: layers.EthernetTypeIPv4}, ip4, u4, payload(size))
	}
	return out
}

// TestPcapCopy: `linerate run -c X` with a pcap rx port, a forward stage and a
// pcap tx port copies every packet byte for byte, exits 0 by itself when the
// input is drained, and tshark reads what it wrote.
func TestPcapCopy(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	want := frames(t)
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1_700_000_000, 0)
	for round := 0; round < 50; round++ {
		for i, fr := range want {
			ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(round*100+i) * time.Microsecond), CaptureLength: len(fr), Length: len(fr)}
			if err := w.WritePacket(ci, fr); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.Close()
	cfg := fmt.Sprintf(`version = 1
[control]
listen = ""
[[pools]]
name = "default"
buffers = 4096
data_room = 9216
[[ports]]
name = "in"
driver = "pcap"
mtu = 9000
rx_file = %q
[[ports]]
name = "out"
driver = "pcap"
mtu = 9000
tx_file = %q
[[pipelines]]
name = "copy"
lcores = [0]
rx = ["in"]
[[pipelines.stages]]
kind = "forward"
port = "out"
`, in, out)
	cfgPath := filepath.Join(dir, "copy.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "run", "-c", cfgPath, "--live=false", "--duration", "60s")
	if code != 0 {
		t.Fatalf("linerate run exited %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "linerate ran for") {
		t.Errorf("no summary printed: %s", stdout)
	}
	rf, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	r, err := pcapgo.NewReader(rf)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if exp := want[n%len(want)]; !bytes.Equal(data, exp) {
			t.Fatalf("packet %d differs: got %d bytes, want %d", n, len(data), len(exp))
		}
		n++
	}
	if n != 50*len(want) {
		t.Fatalf("copied %d packets, want %d", n, 50*len(want))
	}
	testenv.RequireCmd(t, "tshark")
	tsOut, err := exec.Command("tshark", "-r", out, "-T", "fields", "-e", "frame.len", "-e", "ieee8021ad.id", "-e", "vlan.id").Output()
	if err != nil {
		t.Fatalf("tshark -r: %v\n%s", err, tsOut)
	}
	lines := strings.Split(strings.TrimSpace(string(tsOut)), "\n")
	if len(lines) != n {
		t.Fatalf("tshark read %d frames, want %d", len(lines), n)
	}
	// QinQ: the 802.1ad service tag 10 outside customer tag 20; the largest frame
	// is 9012 bytes.
	if !strings.Contains(string(tsOut), "10\t20") || !strings.Contains(string(tsOut), "9012") {
		t.Errorf("tshark did not see the QinQ tags or the jumbo frame:\n%s", lines[:12])
	}
}
