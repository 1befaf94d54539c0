package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the pcap and pcapng readers. They must
// never panic, never hand out a record over MaxRecord, and whatever they read
// must survive a round trip through the pcap writer: read → write → read gives
// the same records.
func FuzzReader(f *testing.F) {
	caps := testCaptures(f, testFrames(f))
	for _, path := range []string{writeOracle(f, caps, false), writeOracle(f, caps, true), writeOracleNg(f, caps)} {
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, o := range []byteOrder{binary.BigEndian, binary.LittleEndian} {
		b := &ngBuilder{o: o}
		b.shb()
		b.idb(linkTypeEther, 64, b.opt(optIfTsresol, []byte{0x80 | 10}), b.opt(optIfTsoffset, o.AppendUint64(nil, 3)))
		b.idb(linkTypeEther, 0, b.opt(optIfTsresol, []byte{12}))
		b.epb(0, 1<<40, frame(60, 0), 60)
		b.epb(1, 1<<40, frame(61, 0), 61, b.opt(1, []byte("c")), []byte{0, 0, 0, 0})
		b.spb(100, frame(64, 1))
		b.opb(1, 77, frame(14, 2))
		f.Add(b.buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		first, err := readUpTo(raw, 1000)
		if err != nil && first == nil {
			return
		}
		var out bytes.Buffer
		w, err := newWriter(&out, MaxRecord)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range first {
			if err := w.write(r.data, r.ts); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
		second, err := readUpTo(out.Bytes(), 1000)
		if err != nil {
			t.Fatalf("reading back what was written: %v", err)
		}
		if len(second) != len(first) {
			t.Fatalf("round trip: %d records, then %d", len(first), len(second))
		}
		for i := range first {
			if !bytes.Equal(first[i].data, second[i].data) {
				t.Errorf("record %d: data differs after the round trip", i)
			}
			// A classic pcap record holds 32 unsigned bits of seconds.
			if ts := first[i].ts; ts >= 0 && ts < 1<<32*1e9 && second[i].ts != ts {
				t.Errorf("record %d: ts %d, then %d", i, ts, second[i].ts)
			}
		}
	})
}

// readUpTo reads at most limit records, copying each out. It returns the records
// and the error that ended the stream, or nil at a clean end.
func readUpTo(raw []byte, limit int) ([]record, error) {
	r, err := newReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	recs := []record{}
	for len(recs) < limit {
		rec, err := r.next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			if len(rec.data) != 0 {
				return recs, errors.New("a record with an error")
			}
			return recs, err
		}
		if len(rec.data) > MaxRecord {
			return recs, errors.New("record over MaxRecord")
		}
		rec.data = append([]byte(nil), rec.data...)
		recs = append(recs, rec)
	}
	return recs, nil
}
