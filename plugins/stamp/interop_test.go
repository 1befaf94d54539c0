package stamp

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/internal/tshark"
)

const python = "/usr/bin/python3"

func requireScapy(t *testing.T) {
	t.Helper()
	err := exec.Command(python, "-c", "import scapy.contrib.stamp").Run()
	testenv.Require(t, "Scapy's STAMP layer (Debian python3-scapy, run with /usr/bin/python3)", err == nil)
}

// scapyFields is what testdata/scapy_stamp.py prints for a frame.
type scapyFields struct {
	Role         string         `json:"role"`
	Segleft      int            `json:"segleft"`
	Segments     []string       `json:"segments"`
	ChecksumOK   bool           `json:"udp_chksum_ok"`
	Seq          uint32         `json:"seq"`
	TS           uint64         `json:"ts"`
	EE           map[string]int `json:"ee"`
	SSID         uint16         `json:"ssid"`
	TSRx         uint64         `json:"ts_rx"`
	SeqSender    uint32         `json:"seq_sender"`
	TSSender     uint64         `json:"ts_sender"`
	EESender     map[string]int `json:"ee_sender"`
	TTLSender    uint8          `json:"ttl_sender"`
	Reserialized string         `json:"reserialized"`
}

func eeOf(m map[string]int) ErrorEstimate {
	return MakeErrorEstimate(m["S"] == 1, m["Z"] == 1, uint8(m["scale"]), uint8(m["multiplier"]))
}

func scapyParse(t *testing.T, frames map[string][][]byte) []scapyFields {
	t.Helper()
	var in bytes.Buffer
	for _, role := range []string{"sender", "reflector"} {
		for _, f := range frames[role] {
			line, _ := json.Marshal(map[string]string{"role": role, "hex": hex.EncodeToString(f)})
			in.Write(append(line, '\n'))
		}
	}
	cmd := exec.Command(python, "testdata/scapy_stamp.py", "parse")
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scapy: %v: %s", err, stderrOf(err))
	}
	var res []scapyFields
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var f scapyFields
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("scapy output %q: %v", sc.Text(), err)
		}
		res = append(res, f)
	}
	return res
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// Scapy's STAMP layer reads linerate's unauthenticated sender and reflector
// packets: every base field, raw.
func TestScapyParsesLinerate(t *testing.T) {
	requireScapy(t)
	c := newChain(t, "src_port = 50000\n", reflectorKeys, "port = 50000\n")
	h := c.h
	frames := map[string][][]byte{}
	for i := 0; i < 3; i++ {
		for _, f := range h.produce(c.snd) {
			frames["sender"] = append(frames["sender"], f)
			h.advance(time.Millisecond)
			rr := h.run(endSRv6(t, f), 0, c.rfl)
			if rr.dropped != "" {
				t.Fatal(rr.dropped)
			}
			frames["reflector"] = append(frames["reflector"], rr.data)
		}
		h.advance(10 * time.Millisecond)
	}
	res := scapyParse(t, frames)
	if len(res) != 6 {
		t.Fatalf("scapy decoded %d frames", len(res))
	}
	for i, f := range res {
		role := f.Role
		frame := frames[role][i%3]
		pay, _ := payloadOf(t, frame)
		if f.Reserialized != hex.EncodeToString(pay[:BaseLen]) {
			t.Errorf("%s %d: Scapy re-serialises %s, linerate sent %x", role, i, f.Reserialized, pay[:BaseLen])
		}
		if !f.ChecksumOK {
			t.Errorf("%s %d: Scapy computes another UDP checksum", role, i)
		}
		if role == "sender" {
			sp := SenderPacket(pay)
			if f.Seq != sp.Seq() || f.TS != sp.Timestamp() || eeOf(f.EE) != sp.ErrorEstimate() || f.SSID != sp.SSID() {
				t.Errorf("sender %d: scapy %+v", i, f)
			}
			if f.Segleft != 1 || len(f.Segments) != 2 || f.Segments[0] != addrR.String() || f.Segments[1] != addrE.String() {
				t.Errorf("sender %d: SRH %d %v", i, f.Segleft, f.Segments)
			}
			continue
		}
		rp := ReflectorPacket(pay)
		if f.Seq != rp.Seq() || f.TS != rp.Timestamp() || eeOf(f.EE) != rp.ErrorEstimate() || f.SSID != rp.SSID() ||
			f.TSRx != rp.ReceiveTimestamp() || f.SeqSender != rp.SenderSeq() || f.TSSender != rp.SenderTimestamp() ||
			eeOf(f.EESender) != rp.SenderErrorEstimate() || f.TTLSender != rp.SenderTTL() {
			t.Errorf("reflector %d: scapy %+v", i, f)
		}
		if f.Segleft != 1 || f.Segments[0] != addrS.String() {
			t.Errorf("reflector %d: SRH %d %v", i, f.Segleft, f.Segments)
		}
	}
}

// linerate's reflector answers test packets Scapy built, and Scapy reads the
// answers.
func TestReflectorAnswersScapy(t *testing.T) {
	requireScapy(t)
	h := newHarness(t)
	rfl := h.MustBuildNamed("stamp.reflector", "refl", "[[sessions]]\nssid = 4242\nmode = \"stateless\"\n")
	const secs = 3913056000 // 2024-01-01 in NTP seconds
	spec := map[string]any{"dst_mac": "02:00:00:00:00:0b", "src_mac": "02:00:00:00:00:0a", "src": addrS.String(),
		"dst": addrR.String(), "hlim": 61, "sport": 50000, "ts": secs, "scale": 3, "multiplier": 7, "ssid": 4242}
	js, _ := json.Marshal(spec)
	cmd := exec.Command(python, "testdata/scapy_stamp.py", "build", "4")
	cmd.Stdin = bytes.NewReader(js)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scapy build: %v: %s", err, stderrOf(err))
	}
	replies := map[string][][]byte{}
	for i, line := range strings.Fields(string(out)) {
		f, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		checkUDP(t, f) // Scapy's own checksum
		h.advance(time.Millisecond)
		rr := h.run(f, 0, rfl)
		if rr.dropped != "" {
			t.Fatalf("packet %d: %s", i, rr.dropped)
		}
		checkUDP(t, rr.data)
		pay, l := payloadOf(t, rr.data)
		rp := ReflectorPacket(pay)
		if rp.SenderSeq() != uint32(i) || rp.Seq() != uint32(i) || rp.SSID() != 4242 || rp.SenderTTL() != 61 ||
			rp.SenderTimestamp() != uint64(secs+i)<<32 || rp.SenderErrorEstimate() != MakeErrorEstimate(true, false, 3, 7) {
			t.Errorf("reply %d: %+v", i, ParseReflectorOrZero(pay))
		}
		if packet.UDP(rr.data[l.L4:]).DstPort() != 50000 {
			t.Error("reply not to Scapy's port")
		}
		replies["reflector"] = append(replies["reflector"], rr.data)
	}
	if len(replies["reflector"]) != 4 {
		t.Fatalf("%d replies", len(replies["reflector"]))
	}
	for i, f := range scapyParse(t, replies) {
		if f.SeqSender != uint32(i) || f.SSID != 4242 || f.TTLSender != 61 {
			t.Errorf("Scapy reads reply %d as %+v", i, f)
		}
	}
}

// ParseReflectorOrZero is ParseReflector for test messages.
func ParseReflectorOrZero(b []byte) ReflectorFields {
	f, _ := ParseReflector(b, false)
	return f
}

// tshark, decoding the STAMP port as TWAMP-test, reads linerate's reflected
// packets with their sequence numbers and timestamps, and the SRH of a test
// packet with its segment list. (Its dissector reads every packet with the
// reflector's layout, so sender packets are checked for their SRH only.)
func TestTshark(t *testing.T) {
	tshark.Require(t)
	c := newChain(t, "", reflectorKeys, "")
	h := c.h
	var senders, replies [][]byte
	for i := 0; i < 4; i++ {
		for _, f := range h.produce(c.snd) {
			senders = append(senders, f)
			h.advance(1234567 * time.Nanosecond)
			rr := h.run(endSRv6(t, f), 0, c.rfl)
			replies = append(replies, rr.data)
		}
		h.advance(10 * time.Millisecond)
	}
	file := filepath.Join(t.TempDir(), "stamp.pcap")
	tshark.WritePcap(t, file, append(append([][]byte(nil), senders...), replies...))
	out := tshark.Run(t, "-r", file, "-d", "udp.port==862,twamp.test", "-T", "fields", "-E", "separator=|",
		"-e", "ipv6.routing.srh.addr", "-e", "twamp.test.seq_number", "-e", "twamp.test.timestamp",
		"-e", "twamp.test.receive_timestamp", "-e", "twamp.test.sender_seq_number", "-e", "twamp.test.sender_timestamp",
		"-e", "twamp.test.sender_ttl", "-e", "_ws.expert")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(senders)+len(replies) {
		t.Fatalf("tshark printed %d lines:\n%s", len(lines), out)
	}
	parseTime := func(s string) int64 {
		tm, err := time.Parse("Jan _2, 2006 15:04:05.000000000 MST", s)
		if err != nil {
			t.Fatalf("tshark time %q: %v", s, err)
		}
		return tm.UnixNano()
	}
	for i, line := range lines {
		f := strings.Split(line, "|")
		if i < len(senders) {
			if f[0] != addrR.String()+","+addrE.String() {
				t.Errorf("sender %d: SRH segments %q", i, f[0])
			}
			continue
		}
		j := i - len(senders)
		pay, _ := payloadOf(t, replies[j])
		rp := ReflectorPacket(pay)
		seq, _ := strconv.Atoi(f[1])
		sseq, _ := strconv.Atoi(f[4])
		ttl, _ := strconv.Atoi(f[6])
		if f[0] != addrS.String()+","+addrE.String() {
			t.Errorf("reply %d: SRH segments %q", j, f[0])
		}
		if uint32(seq) != rp.Seq() || uint32(sseq) != rp.SenderSeq() || uint8(ttl) != rp.SenderTTL() {
			t.Errorf("reply %d: tshark seq %d sender seq %d ttl %d", j, seq, sseq, ttl)
		}
		for k, want := range []uint64{rp.Timestamp(), rp.ReceiveTimestamp(), rp.SenderTimestamp()} {
			got := parseTime(f[[]int{2, 3, 5}[k]])
			// Wireshark truncates the NTP fraction to ns; clock.FromNTP rounds.
			if d := got - clock.FromNTP(want); d < -1 || d > 1 {
				t.Errorf("reply %d: timestamp %d is %d ns, want %d", j, k, got, clock.FromNTP(want))
			}
		}
		if len(f) > 7 && f[7] != "" {
			t.Errorf("reply %d: expert info %q", j, f[7])
		}
	}
}
