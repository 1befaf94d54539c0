package ioam

import (
	"bufio"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/linerate/linerate/appliance/ipfix"
)

// everyFieldRecord is a decap record of two hops of trace type 0xFFFFFE.
func everyFieldRecord() *Record {
	const tt = 0xFFFFFE
	r := &Record{Unix: 1_700_000_000_500_000_000, Role: RoleDecap, Have: HaveTrace, TraceNS: 9, TraceType: tt, NodeLen: uint8(NodeLen(tt)), Format: TimestampPOSIX}
	r.Src[15], r.Dst[15] = 1, 2
	nodes := append(recordNode(0x80000000), recordNode(0xFFFFFFFF)...) // newest first
	r.DataLen = uint8(copy(r.Data[:], nodes))
	return r
}

// captureExporter is an exporter to a UDP socket; its records come back
// through the returned func, which reads one message's hop records.
func captureExporter(t testing.TB) (*ipfix.Exporter, func() [][]byte) {
	sock, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	x := ipfix.NewExporter(ipfix.Config{Collectors: []string{"udp:" + sock.LocalAddr().String()}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := x.Register(HopTemplate); err != nil {
		t.Fatal(err)
	}
	read := func() [][]byte {
		buf := make([]byte, 65535)
		for {
			n, _, err := sock.ReadFrom(buf)
			if err != nil {
				t.Fatal(err)
			}
			var out [][]byte
			for o := 16; o < n; {
				id, l := binary.BigEndian.Uint16(buf[o:]), int(binary.BigEndian.Uint16(buf[o+2:]))
				for r := o + 4; id == HopTemplateID && r+hopRecordLen <= o+l; r += hopRecordLen {
					out = append(out, append([]byte(nil), buf[r:r+hopRecordLen]...))
				}
				o += l
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	return x, read
}

// A record's hops as IPFIX records: oldest hop first, wide ids where the
// trace has them, all ones where a node wrote none.
func TestIPFIXHops(t *testing.T) {
	if HopTemplate.Size() != hopRecordLen {
		t.Fatalf("template size %d, hopRecordLen %d", HopTemplate.Size(), hopRecordLen)
	}
	x, read := captureExporter(t)
	x.Start()
	defer x.Stop()
	var buf [hopRecordLen]byte
	ipfixHops(x, everyFieldRecord(), 77, buf[:])
	recs := read()
	if len(recs) != 2 {
		t.Fatalf("%d hop records, want 2", len(recs))
	}
	be := binary.BigEndian
	for i, r := range recs {
		if r[23] != 1 || r[39] != 2 {
			t.Errorf("hop %d: addresses % x", i, r[8:40])
		}
		in, out := be.Uint32(r[40:]), be.Uint32(r[44:])
		id, role, ns, tt := be.Uint64(r[48:]), r[56], be.Uint16(r[57:]), be.Uint32(r[59:])
		idx, count, hl, node := r[63], r[64], r[65], be.Uint64(r[66:])
		ts, delay, transit, qd := be.Uint64(r[74:]), int64(be.Uint64(r[82:])), be.Uint32(r[90:]), be.Uint32(r[94:])
		nsd, bo := be.Uint64(r[98:]), be.Uint32(r[106:])
		if in != 0x0B0B0B0B || out != 0xFFFFFFFF || id != 77 || role != RoleDecap || ns != 9 || tt != 0xFFFFFE ||
			int(idx) != i || count != 2 || hl != 63 || node != 0xC0FFEE12345678 || qd != 5 || nsd != 0x1122334455667788 || bo != 0xFFFFFFFF {
			t.Errorf("hop %d: in %x out %x id %d role %d ns %d type %x index %d count %d hl %d node %x qd %d nsd %x bo %x",
				i, in, out, id, role, ns, tt, idx, count, hl, node, qd, nsd, bo)
		}
		// The fraction is unknown: no timestamp, so no delay.
		if ts != 0 || delay != -1 {
			t.Errorf("hop %d: timestamp %d delay %d", i, ts, delay)
		}
		// The oldest hop wrote all ones as its transit delay; the newer one overflowed.
		if want := []uint32{0xFFFFFFFF, 0x80000000}[i]; transit != want {
			t.Errorf("hop %d: transit delay %x, want %x", i, transit, want)
		}
	}
}

// BenchmarkExportRecord: what a record costs the export's control
// goroutine, its hops sent to an IPFIX collector beside its JSON line (the
// baseline, export_file): records/s of each.
func BenchmarkExportRecord(b *testing.B) {
	r := everyFieldRecord()
	b.Run("json", func(b *testing.B) {
		w := bufio.NewWriter(io.Discard)
		for b.Loop() {
			line, _ := r.MarshalLine("dec")
			_, _ = w.Write(line)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("ipfix", func(b *testing.B) {
		x, _ := captureExporter(b)
		x.Start()
		defer x.Stop()
		var buf [hopRecordLen]byte
		for i := uint64(0); b.Loop(); i++ {
			ipfixHops(x, r, i, buf[:])
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}
