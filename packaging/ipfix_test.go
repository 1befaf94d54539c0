package packaging

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/internal/tshark"
)

// startNfacctd runs nfacctd with the collector files in dir from (the
// repository's packaging/collectors, or a package's examples), as
// docs/operations.md says: its own port on 127.0.0.1, the primitives where
// the config names them, and a 1 s print.
func startNfacctd(t *testing.T, dir, from string) (*proc, int) {
	t.Helper()
	nfacctd := testenv.RequireCmd(t, "nfacctd")
	port := freePort(t, "udp")
	conf, err := os.ReadFile(filepath.Join(from, "nfacctd.conf"))
	if err != nil {
		t.Fatal(err)
	}
	c := strings.NewReplacer("nfacctd_port: 4739", "nfacctd_port: "+strconv.Itoa(port)+"\nnfacctd_ip: 127.0.0.1",
		"/etc/pmacct/linerate-primitives.lst", filepath.Join(dir, "primitives.lst"),
		"/run/lock/linerate-nfacctd.lock", filepath.Join(dir, "nfacctd.lock"),
		"print_refresh_time[ioam]: 5", "print_refresh_time[ioam]: 1",
		"print_refresh_time[stamp]: 5", "print_refresh_time[stamp]: 1").Replace(string(conf))
	prim, err := os.ReadFile(filepath.Join(from, "primitives.lst"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "primitives.lst"), prim, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nfacctd.conf"), []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	nf := start(t, nil, nfacctd, "-f", filepath.Join(dir, "nfacctd.conf"))
	nf.stopSig = os.Kill // it lingers on SIGTERM, printing
	return nf, port
}

// TestNfacctdConfigClean: Debian's nfacctd loads the collector config a
// user copies without a warning or an error (pmacct 1.7.7 ignored
// print_history: 5s with two, and warns of a print plugin on stdout with no
// lock file). The plugins warn as they start, before their loop: once both
// have printed a record of a message sent to them, every warning is out.
func TestNfacctdConfigClean(t *testing.T) {
	nf, port := startNfacctd(t, t.TempDir(), "collectors")
	c, err := net.Dial("udp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := ipfixMessage()
	waitFor(t, "a record from each print plugin", nf, func() bool {
		_, _ = c.Write(msg) // again until nfacctd listens
		out := nf.out.String()
		return strings.Contains(out, `"ioam_record_id"`) && strings.Contains(out, `"stamp_ssid"`)
	})
	out := nf.out.String() // before the kill, which the plugins log as an error
	_ = nf.stop()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "WARN") || strings.HasPrefix(l, "ERROR") {
			t.Errorf("nfacctd: %s", l)
		}
	}
}

// ipfixMessage is an IPFIX message of a template (sourceIPv4Address,
// destinationIPv4Address) and one record of it.
func ipfixMessage() []byte {
	be := binary.BigEndian
	m := be.AppendUint16(nil, 10)
	m = be.AppendUint16(m, 0) // length, below
	m = be.AppendUint32(m, uint32(time.Now().Unix()))
	m = be.AppendUint32(m, 0) // sequence
	m = be.AppendUint32(m, 1) // observation domain
	m = be.AppendUint16(m, 2) // template set
	m = be.AppendUint16(m, 16)
	m = be.AppendUint16(m, 256)
	m = be.AppendUint16(m, 2)
	m = be.AppendUint16(m, 8) // sourceIPv4Address
	m = be.AppendUint16(m, 4)
	m = be.AppendUint16(m, 12) // destinationIPv4Address
	m = be.AppendUint16(m, 4)
	m = be.AppendUint16(m, 256) // data set
	m = be.AppendUint16(m, 12)
	m = append(m, 192, 0, 2, 1, 198, 51, 100, 1)
	be.PutUint16(m[2:], uint16(len(m)))
	return m
}

// ipfixLab is the lab config with IOAM decap's export on and an [ipfix]
// table sending to collectors, templates refreshed every second.
func ipfixLab(t *testing.T, dir string, collectors ...string) string {
	t.Helper()
	lab, err := exec.Command(linerateBin, "config", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lab-ipfix.toml")
	if err := os.WriteFile(path, []byte(withIPFIX(t, string(lab), collectors...)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(linerateBin, "validate", "--offline", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	return path
}

// withIPFIX is the lab config cfg with IOAM decap's export on, the STAMP
// collector's interval 1 s, and an [ipfix] table sending to collectors.
func withIPFIX(t *testing.T, cfg string, collectors ...string) string {
	t.Helper()
	const off = "export = false                 # true: trace records to the control API's stream"
	if !strings.Contains(cfg, off) {
		t.Fatal("the lab config's ioam.decap has no export = false")
	}
	cfg = strings.Replace(cfg, off, "export = true\nexport_sample = 100", 1)
	const col = `name = "stamp-collector"`
	if !strings.Contains(cfg, col) {
		t.Fatal("the lab config has no stamp-collector")
	}
	cfg = strings.Replace(cfg, col, col+"\nipfix_interval = \"1s\"", 1)
	return cfg + "\n[ipfix]\ncollectors = [\"" + strings.Join(collectors, `", "`) + "\"]\nobservation_domain = 7\ntemplate_refresh = \"1s\"\n"
}

// TestIPFIXCollectors runs the lab exporting IOAM records over IPFIX to
// pmacct's nfacctd, configured with the collector files this package ships
// (packaging/collectors), and to a UDP socket whose messages tshark's IPFIX
// dissector decodes. nfacctd prints each hop of the lab's 4-node trace with
// linerate's enterprise elements; tshark finds no malformed field; the
// messages' sequence numbers count the data records and the templates come
// again every template_refresh.
func TestIPFIXCollectors(t *testing.T) {
	tshark.Require(t)
	dir := t.TempDir()

	nf, nfPort := startNfacctd(t, dir, "collectors")
	t.Logf("%s: start", time.Now().Format(time.TimeOnly))

	// The socket whose messages go to tshark.
	sock, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	// 8 MiB, so that the test's reader descheduled on a busy host loses no
	// message: SetReadBuffer is capped at net.core.rmem_max (208 KiB by
	// default), SO_RCVBUFFORCE is not, for root (24545 records were lost
	// once under -race with the cap).
	_ = sock.(*net.UDPConn).SetReadBuffer(8 << 20)
	if rc, err := sock.(*net.UDPConn).SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) })
	}
	var mu sync.Mutex
	var msgs [][]byte
	go func() {
		buf := make([]byte, 65535)
		for {
			n, _, err := sock.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, append([]byte(nil), buf[:n]...))
			mu.Unlock()
		}
	}()
	goPort := sock.LocalAddr().(*net.UDPAddr).Port

	cfg := ipfixLab(t, dir, "udp:127.0.0.1:"+strconv.Itoa(nfPort), "udp:127.0.0.1:"+strconv.Itoa(goPort))
	lr := start(t, []string{"LINERATE_CONTROL=unix:" + filepath.Join(dir, "ctl.sock")}, linerateBin, "run", "-c", cfg, "--live=false", "--log-level", "warn")

	// nfacctd prints one JSON object a hop record.
	type hop struct {
		Src, Dst                    string
		In, Out, Node, Index, Count uint64
		Limit, NS                   uint64
	}
	var hops []hop
	waitFor(t, "nfacctd to print hop records of all 4 hops", lr, func() bool {
		hops = hops[:0]
		sc := bufio.NewScanner(strings.NewReader(nf.out.String()))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil || m["ioam_record_id"] == nil || fmt.Sprint(m["ioam_hop_count"]) == "0" {
				continue
			}
			num := func(k string) uint64 {
				switch v := m[k].(type) {
				case float64:
					return uint64(v)
				case string:
					n, _ := strconv.ParseUint(v, 10, 64)
					return n
				}
				t.Fatalf("nfacctd printed no %s: %s", k, sc.Text())
				return 0
			}
			src, _ := m["ip_src"].(string)
			dst, _ := m["ip_dst"].(string)
			hops = append(hops, hop{Src: src, Dst: dst, In: num("iface_in"), Out: num("iface_out"), Node: num("ioam_node_id"),
				Index: num("ioam_hop_index"), Count: num("ioam_hop_count"), Limit: num("ioam_hop_limit"), NS: num("ioam_ns")})
		}
		seen := map[uint64]bool{}
		for _, h := range hops {
			seen[h.Index] = true
		}
		return len(seen) == 4
	})
	for _, h := range hops {
		if !strings.HasPrefix(h.Src, "2001:db8:1::") || h.Dst != "2001:db8:2::1" || h.NS != 1 || h.Count != 4 || h.Node != h.Index+1 {
			t.Errorf("nfacctd printed a hop the lab did not make: %+v", h)
		}
	}
	t.Logf("%s: nfacctd printed %d hop records", time.Now().Format(time.TimeOnly), len(hops))

	// And the STAMP session's intervals: the lab's session 1, from
	// 2001:db8:30::1 to its reflector 2001:db8:40::1, every second.
	var stamp []map[string]any
	waitFor(t, "nfacctd to print STAMP interval records with replies", lr, func() bool {
		stamp = stamp[:0]
		sc := bufio.NewScanner(strings.NewReader(nf.out.String()))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && fmt.Sprint(m["stamp_ssid"]) == "1" {
				stamp = append(stamp, m)
			}
		}
		for _, m := range stamp {
			if fmt.Sprint(m["stamp_received"]) != "0" {
				return true
			}
		}
		return false
	})
	t.Logf("a STAMP interval as nfacctd prints it: %v", stamp[len(stamp)-1])
	for _, m := range stamp {
		if m["ip_src"] != "2001:db8:30::1" || m["ip_dst"] != "2001:db8:40::1" {
			t.Errorf("a STAMP record of other addresses: %v", m)
		}
		sent, _ := strconv.ParseFloat(fmt.Sprint(m["stamp_sent"]), 64)
		recv, _ := strconv.ParseFloat(fmt.Sprint(m["stamp_received"]), 64)
		p50, _ := strconv.ParseFloat(fmt.Sprint(m["stamp_rtt_p50"]), 64)
		if recv > 0 && (p50 < 1e6 || p50 > 1e9 || sent < 500 || sent > 2000) {
			// The lab's links delay 1 ms each way; the session sends every 1 ms.
			t.Errorf("a STAMP interval unlike the lab's: sent %v received %v rtt p50 %v ns: %v", sent, recv, p50, m)
		}
	}
	if err := lr.stop(); err != nil {
		t.Errorf("linerate: %v\n%s", err, lr.out.String())
	}
	t.Logf("%s: linerate stopped", time.Now().Format(time.TimeOnly))

	// tshark: every message decodes, with no malformed field; the data
	// records are the hop template's.
	mu.Lock()
	got := append([][]byte(nil), msgs...)
	mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("%d IPFIX messages", len(got))
	}
	checkSequence(t, got)
	var frames [][]byte
	for _, m := range got {
		frames = append(frames, udpFrame(t, m))
	}
	pcap := filepath.Join(dir, "ipfix.pcap")
	tshark.WritePcap(t, pcap, frames)
	if bad := strings.TrimSpace(string(tshark.Run(t, "-r", pcap, "-d", "udp.port==4739,cflow", "-Y", "_ws.malformed || _ws.expert.severity >= warning"))); bad != "" {
		t.Errorf("tshark finds malformed IPFIX:\n%s", bad)
	}
	// The filter sees a malformed message: a set shorter than its header.
	broken := append([]byte(nil), got[len(got)-1]...)
	binary.BigEndian.PutUint16(broken[18:], 2)
	tshark.WritePcap(t, pcap+".bad", [][]byte{udpFrame(t, broken)})
	if bad := strings.TrimSpace(string(tshark.Run(t, "-r", pcap+".bad", "-d", "udp.port==4739,cflow", "-Y", "_ws.malformed || _ws.expert.severity >= warning"))); bad == "" {
		t.Error("tshark's filter does not see a broken message")
	}
	out := string(tshark.Run(t, "-r", pcap, "-d", "udp.port==4739,cflow", "-T", "fields", "-E", "separator=;",
		"-e", "cflow.version", "-e", "cflow.od_id", "-e", "cflow.srcaddrv6", "-e", "cflow.template_id"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	data := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "10;7;") {
			t.Errorf("tshark: a message that is not IPFIX of domain 7: %q", l)
		}
		if strings.Contains(l, ";2001:db8:1::") {
			data++
		}
	}
	if data == 0 {
		t.Errorf("tshark decodes no hop record's sourceIPv6Address:\n%s", out)
	}
}

// checkSequence holds the messages to RFC 7011: version 10, a length that
// is the datagram's, a sequence number that counts the data records of the
// messages before it (more when the socket lost a message, never fewer),
// and a template set at least every 2 s of export time.
func checkSequence(t *testing.T, msgs [][]byte) {
	t.Helper()
	var seq uint32
	lastTemplates := uint32(0)
	for i, m := range msgs {
		if binary.BigEndian.Uint16(m) != 10 || int(binary.BigEndian.Uint16(m[2:])) != len(m) {
			t.Fatalf("message %d: version %d length %d of %d", i, binary.BigEndian.Uint16(m), binary.BigEndian.Uint16(m[2:]), len(m))
		}
		export := binary.BigEndian.Uint32(m[4:])
		got := binary.BigEndian.Uint32(m[8:])
		if got < seq {
			t.Fatalf("message %d: sequence %d, below the %d records before it", i, got, seq)
		}
		if got > seq {
			t.Logf("message %d: sequence %d: %d records lost on the way", i, got, got-seq)
		}
		seq = got
		for o := 16; o < len(m); {
			id, n := binary.BigEndian.Uint16(m[o:]), int(binary.BigEndian.Uint16(m[o+2:]))
			if n < 4 || o+n > len(m) {
				t.Fatalf("message %d: set %d of length %d at %d", i, id, n, o)
			}
			switch {
			case id == 2:
				lastTemplates = export
			case id == 256:
				seq += uint32((n - 4) / 110)
			case id == 257:
				seq += uint32((n - 4) / 258)
			default:
				t.Fatalf("message %d: set %d", i, id)
			}
			o += n
		}
		if lastTemplates == 0 || export-lastTemplates > 2 {
			t.Fatalf("message %d at %d: templates last sent at %d", i, export, lastTemplates)
		}
	}
}

// udpFrame is an IPFIX message as the collector's port got it, for tshark.
func udpFrame(t *testing.T, msg []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{127, 0, 0, 1}, DstIP: net.IP{127, 0, 0, 1}}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 4739}
	_ = udp.SetNetworkLayerForChecksum(ip)
	b := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(msg)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
