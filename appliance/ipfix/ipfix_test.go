package ipfix

import (
	"bufio"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linerate/linerate/config"
)

var testTemplate = &Template{ID: 300, Name: "test", Fields: []Field{
	ObservationTimeNanoseconds,
	{ID: 1, Enterprise: DocumentationPEN, Len: 4, Name: "testValue", Type: "unsigned32"},
}}

// message is a decoded IPFIX message.
type message struct {
	seq, domain uint32
	templates   map[uint16][]byte // template ID: its template record
	data        map[uint16][][]byte
}

// parse decodes one message, holding it to RFC 7011's layout.
func parse(t *testing.T, b []byte) message {
	t.Helper()
	if len(b) < 16 || binary.BigEndian.Uint16(b) != Version || int(binary.BigEndian.Uint16(b[2:])) != len(b) {
		t.Fatalf("message header % x", b[:min(len(b), 16)])
	}
	m := message{seq: binary.BigEndian.Uint32(b[8:]), domain: binary.BigEndian.Uint32(b[12:]),
		templates: map[uint16][]byte{}, data: map[uint16][][]byte{}}
	for o := 16; o < len(b); {
		id, n := binary.BigEndian.Uint16(b[o:]), int(binary.BigEndian.Uint16(b[o+2:]))
		if n < 4 || o+n > len(b) {
			t.Fatalf("set %d length %d at %d of %d", id, n, o, len(b))
		}
		body := b[o+4 : o+n]
		switch {
		case id == TemplateSetID:
			for len(body) > 0 {
				tid, cnt := binary.BigEndian.Uint16(body), int(binary.BigEndian.Uint16(body[2:]))
				l := 4
				for range cnt {
					if binary.BigEndian.Uint16(body[l:])&0x8000 != 0 {
						l += 8
					} else {
						l += 4
					}
				}
				m.templates[tid] = body[:l]
				body = body[l:]
			}
		case id >= MinDataSetID:
			size := testTemplate.Size()
			if len(body)%size != 0 {
				t.Fatalf("data set of %d bytes, records of %d", len(body), size)
			}
			for ; len(body) > 0; body = body[size:] {
				m.data[id] = append(m.data[id], body[:size])
			}
		default:
			t.Fatalf("set ID %d", id)
		}
		o += n
	}
	return m
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func record(v uint32) []byte {
	b := make([]byte, testTemplate.Size())
	NewRecord(b).Nanos(1_700_000_000_123_456_789).U32(v)
	return b
}

// Over UDP: the template comes before the first record, sequence numbers
// count the records before each message, no message is larger than
// max_message, and the template comes again every template_refresh.
func TestUDPExport(t *testing.T) {
	sock, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	e := NewExporter(Config{Collectors: []string{"udp:" + sock.LocalAddr().String()}, ObservationDomain: 9,
		TemplateRefresh: config.Duration(time.Second), MaxMessage: 512}, quiet())
	if err := e.Register(testTemplate); err != nil {
		t.Fatal(err)
	}
	e.Start()
	const n = 200
	for i := range n {
		e.Add(testTemplate.ID, record(uint32(i)))
	}
	buf := make([]byte, 65535)
	next := func() (message, int) {
		_ = sock.SetReadDeadline(time.Now().Add(time.Minute))
		k, _, err := sock.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		return parse(t, buf[:k]), k
	}
	var got uint32
	for got < n {
		m, size := next()
		if size > 512 {
			t.Fatalf("a message of %d bytes, max_message 512", size)
		}
		if got == 0 && m.templates[300] == nil {
			t.Fatal("the first message has no template")
		}
		if m.seq != got || m.domain != 9 {
			t.Fatalf("sequence %d domain %d, want %d 9", m.seq, m.domain, got)
		}
		for _, r := range m.data[300] {
			if v := binary.BigEndian.Uint32(r[8:]); v != got {
				t.Fatalf("record %d holds %d", got, v)
			}
			got++
		}
	}
	// With nothing to send, the template comes alone within a refresh.
	start := time.Now()
	for {
		m, _ := next()
		if m.templates[300] != nil && len(m.data) == 0 {
			if m.seq != n {
				t.Errorf("a template message's sequence %d, want %d", m.seq, n)
			}
			break
		}
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("no template refresh for %v", time.Since(start))
	}
	// Prometheus sees the collector's counts while the exporter runs.
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			if m.Label[0].GetValue() == "udp:"+sock.LocalAddr().String() {
				counts[f.GetName()] = m.Counter.GetValue()
			}
		}
	}
	if counts["linerate_ipfix_records_total"] != n || counts["linerate_ipfix_messages_total"] == 0 || counts["linerate_ipfix_send_errors_total"] != 0 {
		t.Errorf("metrics: %v", counts)
	}
	e.Stop()
	if r, msgs, errs := e.Stats(); r != n || msgs == 0 || errs != 0 {
		t.Errorf("stats: %d records %d messages %d errors", r, msgs, errs)
	}
	if fams, _ := reg.Gather(); len(fams) != 0 {
		t.Errorf("a stopped exporter still has metrics: %v", fams)
	}
}

// Over TCP the templates come first on each connection: a collector that
// goes and comes back gets them again before any record.
func TestTCPReconnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := NewExporter(Config{Collectors: []string{"tcp:" + l.Addr().String()}}, quiet())
	if err := e.Register(testTemplate); err != nil {
		t.Fatal(err)
	}
	e.Start()
	defer e.Stop()
	// Records keep coming: the exporter learns that a collector went when
	// a write fails.
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for i := uint32(0); ; i++ {
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Millisecond):
				e.Add(testTemplate.ID, record(i))
			}
		}
	}()
	read := func(c net.Conn) message {
		r := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		h := make([]byte, 4)
		if _, err := io.ReadFull(r, h); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint16(h[2:]))
		copy(b, h)
		if _, err := io.ReadFull(r, b[4:]); err != nil {
			t.Fatal(err)
		}
		return parse(t, b)
	}
	for round := range 2 {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		sawTemplate := false
		for got := 0; got == 0; {
			m := read(c)
			if m.templates[300] != nil {
				sawTemplate = true
			}
			if len(m.data[300]) > 0 && !sawTemplate {
				t.Fatalf("round %d: a record before the template", round)
			}
			got = len(m.data[300])
		}
		c.Close()
	}
}

func TestTemplateEncoding(t *testing.T) {
	b := testTemplate.withEnterprise(12345).appendRecord(nil)
	want := []byte{1, 44, 0, 2, 1, 69, 0, 8, 0x80, 1, 0, 4, 0, 0, 0x30, 0x39}
	if string(b) != string(want) {
		t.Errorf("template record % x, want % x", b, want)
	}
	r := make([]byte, 8)
	NewRecord(r).Nanos(0)
	if binary.BigEndian.Uint32(r) != 2208988800 || binary.BigEndian.Uint32(r[4:]) != 0 {
		t.Errorf("Unix epoch as dateTimeNanoseconds: % x", r)
	}
	NewRecord(r).Nanos(500_000_000)
	if binary.BigEndian.Uint32(r[4:]) != 1<<31 {
		t.Errorf("half a second: % x", r)
	}
	if err := (&Template{ID: 2, Name: "x"}).check(); err == nil {
		t.Error("template ID 2 accepted")
	}
}

// The [ipfix] table: a bad value is an error naming the key and line.
func TestConfig(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`collectors = ["udp:192.0.2.1:4739"]`, ""},
		{`collectors = ["tcp:[2001:db8::1]:4739"]` + "\ntemplate_refresh = \"10s\"", ""},
		{`collectors = []`, "ipfix.collectors: missing"},
		{`collectors = ["sctp:192.0.2.1:4739"]`, `ipfix.collectors[0]: "sctp:192.0.2.1:4739"`},
		{`collectors = ["udp:192.0.2.1"]`, `ipfix.collectors[0]`},
		{`collectors = ["udp:192.0.2.1:4739"]` + "\ntemplate_refresh = \"10ms\"", "ipfix.template_refresh: 10ms is below 1s"},
		{`collectors = ["udp:192.0.2.1:4739"]` + "\nmax_message = 100", "ipfix.max_message"},
		{`collectors = ["udp:192.0.2.1:4739"]` + "\ncolectors = 1", "ipfix.colectors: unknown key"},
	} {
		src := "version = 1\n[[ports]]\nname = \"n\"\ndriver = \"null\"\n[[pipelines]]\nname = \"p\"\nstages = [{ kind = \"forward\", port = \"n\" }]\n[ipfix]\n" + c.body + "\n"
		_, err := config.Parse("t.toml", []byte(src))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.body, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "t.toml:")):
			t.Errorf("%s: error %v, want %q with file:line", c.body, err, c.want)
		}
	}
}
