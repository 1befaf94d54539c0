package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// ngBuilder writes pcapng blocks in either byte order, independently of the
// reader, from the figures of the pcapng draft (draft-ietf-opsawg-pcapng).
type ngBuilder struct {
	o   byteOrder
	buf bytes.Buffer
}

func (b *ngBuilder) block(typ uint32, body []byte) {
	pad := (4 - len(body)%4) % 4
	total := uint32(12 + len(body) + pad)
	b.buf.Write(b.o.AppendUint32(nil, typ))
	b.buf.Write(b.o.AppendUint32(nil, total))
	b.buf.Write(body)
	b.buf.Write(make([]byte, pad))
	b.buf.Write(b.o.AppendUint32(nil, total))
}

func (b *ngBuilder) opt(code uint16, v []byte) []byte {
	out := b.o.AppendUint16(nil, code)
	out = b.o.AppendUint16(out, uint16(len(v)))
	out = append(out, v...)
	return append(out, make([]byte, (4-len(v)%4)%4)...)
}

func (b *ngBuilder) shb(opts ...[]byte) {
	body := b.o.AppendUint32(nil, ngByteOrder)
	body = b.o.AppendUint16(body, 1)
	body = b.o.AppendUint16(body, 0)
	body = b.o.AppendUint64(body, ^uint64(0)) // section length unknown
	for _, o := range opts {
		body = append(body, o...)
	}
	b.block(ngSHB, body)
}

func (b *ngBuilder) idb(linkType uint16, snaplen uint32, opts ...[]byte) {
	body := b.o.AppendUint16(nil, linkType)
	body = b.o.AppendUint16(body, 0)
	body = b.o.AppendUint32(body, snaplen)
	for _, o := range opts {
		body = append(body, o...)
	}
	if len(opts) > 0 {
		body = append(body, 0, 0, 0, 0) // opt_endofopt
	}
	b.block(ngIDB, body)
}

func (b *ngBuilder) epb(id uint32, ts uint64, data []byte, origLen uint32, opts ...[]byte) {
	body := b.o.AppendUint32(nil, id)
	body = b.o.AppendUint32(body, uint32(ts>>32))
	body = b.o.AppendUint32(body, uint32(ts))
	body = b.o.AppendUint32(body, uint32(len(data)))
	body = b.o.AppendUint32(body, origLen)
	body = append(body, data...)
	body = append(body, make([]byte, (4-len(data)%4)%4)...)
	for _, o := range opts {
		body = append(body, o...)
	}
	b.block(ngEPB, body)
}

func (b *ngBuilder) opb(id uint16, ts uint64, data []byte) {
	body := b.o.AppendUint16(nil, id)
	body = b.o.AppendUint16(body, 0) // drops
	body = b.o.AppendUint32(body, uint32(ts>>32))
	body = b.o.AppendUint32(body, uint32(ts))
	body = b.o.AppendUint32(body, uint32(len(data)))
	body = b.o.AppendUint32(body, uint32(len(data)))
	body = append(body, data...)
	b.block(ngOPB, body)
}

func (b *ngBuilder) spb(origLen uint32, data []byte) {
	body := b.o.AppendUint32(nil, origLen)
	body = append(body, data...)
	b.block(ngSPB, body)
}

type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

type want struct {
	data    []byte
	ts      int64
	origLen int
}

func frame(n int, seed byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = seed + byte(i)
	}
	return f
}

func readAll(t *testing.T, raw []byte) ([]want, error) {
	t.Helper()
	r, err := newReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	var got []want
	for {
		rec, err := r.next()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, want{append([]byte(nil), rec.data...), rec.ts, rec.origLen})
	}
}

func checkRecords(t *testing.T, got, exp []want) {
	t.Helper()
	if len(got) != len(exp) {
		t.Fatalf("%d records, want %d", len(got), len(exp))
	}
	for i := range exp {
		if !bytes.Equal(got[i].data, exp[i].data) || got[i].ts != exp[i].ts || got[i].origLen != exp[i].origLen {
			t.Errorf("record %d: %d bytes ts %d orig %d, want %d bytes ts %d orig %d", i,
				len(got[i].data), got[i].ts, got[i].origLen, len(exp[i].data), exp[i].ts, exp[i].origLen)
		}
	}
}

// TestPcapngVariants covers what gopacket's writer never produces: big-endian
// sections, if_tsresol in µs, ms with an offset, and binary fractions, simple and
// obsolete packet blocks, blocks to skip, and a second section that resets the
// interfaces.
func TestPcapngVariants(t *testing.T) {
	for _, o := range []byteOrder{binary.BigEndian, binary.LittleEndian} {
		t.Run(o.String(), func(t *testing.T) {
			b := &ngBuilder{o: o}
			var exp []want
			b.shb(b.opt(1, []byte("a comment")), []byte{0, 0, 0, 0})
			b.idb(linkTypeEther, 0)                                                                                 // 0: µs by default
			b.idb(linkTypeEther, 96, b.opt(optIfTsresol, []byte{0x80 | 20}))                                        // 1: 2^-20 s
			b.idb(linkTypeEther, 0, b.opt(optIfTsresol, []byte{3}), b.opt(optIfTsoffset, o.AppendUint64(nil, 100))) // 2: ms, +100 s
			b.block(5, make([]byte, 20))                                                                            // interface statistics: skipped
			b.block(0x40000BAD, []byte{1, 2, 3, 4, 5})                                                              // custom block: skipped

			f := frame(61, 1)
			b.epb(0, 1_700_000_000_123_456, f, 61, b.opt(1, []byte("pkt comment")), []byte{0, 0, 0, 0})
			exp = append(exp, want{f, 1_700_000_000_123_456_000, 61})

			f = frame(64, 2)
			b.epb(1, 5<<20|1<<19, f, 1500) // 5.5 s, captured 64 of 1500
			exp = append(exp, want{f, 5_500_000_000, 1500})

			f = frame(3, 3)
			b.epb(2, 2500, f, 3) // 2.5 s + 100 s
			exp = append(exp, want{f, 102_500_000_000, 3})

			f = frame(100, 4)
			b.spb(100, f) // no timestamp: the previous one; snaplen of iface 0 is 0 (none)
			exp = append(exp, want{f, 102_500_000_000, 100})

			f = frame(42, 5)
			b.opb(0, 7_000_001, f)
			exp = append(exp, want{f, 7_000_001_000, 42})

			// A second section: interface ids start again, here at ns.
			b.shb()
			b.idb(linkTypeEther, 65535, b.opt(optIfTsresol, []byte{9}))
			f = frame(1, 6)
			b.epb(0, 1_234_567_890_123, f, 1)
			exp = append(exp, want{f, 1_234_567_890_123, 1})

			got, err := readAll(t, b.buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, exp)
		})
	}
}

func TestPcapBigEndian(t *testing.T) {
	o := binary.BigEndian
	raw := o.AppendUint32(nil, magicMicros)
	raw = o.AppendUint16(raw, 2)
	raw = o.AppendUint16(raw, 4)
	raw = append(raw, make([]byte, 8)...)
	raw = o.AppendUint32(raw, 65535)
	raw = o.AppendUint32(raw, linkTypeEther|0x10000000) // FCS bits above the link type
	var exp []want
	for i, n := range []int{60, 1514, 0} {
		f := frame(n, byte(i))
		raw = o.AppendUint32(raw, uint32(1000+i))
		raw = o.AppendUint32(raw, 999_999)
		raw = o.AppendUint32(raw, uint32(n))
		raw = o.AppendUint32(raw, uint32(n+4))
		raw = append(raw, f...)
		exp = append(exp, want{f, int64(1000+i)*1e9 + 999_999_000, n + 4})
	}
	r, err := newReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if r.linkType != linkTypeEther {
		t.Errorf("link type %d", r.linkType)
	}
	got, err := readAll(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, got, exp)
}

func TestReaderErrors(t *testing.T) {
	le := binary.LittleEndian
	pcapHdr := func() []byte {
		h := le.AppendUint32(nil, magicNanos)
		h = le.AppendUint16(h, 2)
		h = le.AppendUint16(h, 4)
		h = append(h, make([]byte, 8)...)
		h = le.AppendUint32(h, 65535)
		return le.AppendUint32(h, 1)
	}
	rec := func(h []byte, capLen, n int) []byte {
		h = le.AppendUint32(h, 1)
		h = le.AppendUint32(h, 2)
		h = le.AppendUint32(h, uint32(capLen))
		h = le.AppendUint32(h, uint32(capLen))
		return append(h, make([]byte, n)...)
	}
	ng := func(f func(b *ngBuilder)) []byte {
		b := &ngBuilder{o: le}
		b.shb()
		f(b)
		return b.buf.Bytes()
	}
	cases := []struct {
		name    string
		raw     []byte
		records int
		tooBig  bool
	}{
		{name: "empty", raw: nil},
		{name: "short magic", raw: []byte{0xd4, 0xc3}},
		{name: "bad magic", raw: []byte("GIF89a..................")},
		{name: "short pcap header", raw: pcapHdr()[:20]},
		{name: "pcap version 3", raw: func() []byte { h := pcapHdr(); h[4] = 3; return h }()},
		{name: "record too big", raw: rec(pcapHdr(), MaxRecord+1, 0), tooBig: true},
		{name: "truncated record", raw: rec(pcapHdr(), 100, 99)},
		{name: "half record header", raw: append(rec(pcapHdr(), 10, 10), 1, 2, 3), records: 1},
		{name: "ng no byte order", raw: []byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4}},
		{name: "ng bad block length", raw: ng(func(b *ngBuilder) {
			b.buf.Write([]byte{1, 0, 0, 0, 13, 0, 0, 0})
		})},
		{name: "ng trailing length", raw: func() []byte {
			r := ng(func(b *ngBuilder) { b.idb(1, 0) })
			r[len(r)-1] = 9
			return r
		}()},
		{name: "ng packet before interface", raw: ng(func(b *ngBuilder) { b.epb(0, 0, frame(10, 0), 10) })},
		{name: "ng packet on missing interface", raw: ng(func(b *ngBuilder) {
			b.idb(1, 0)
			b.epb(0, 0, frame(10, 0), 10)
			b.epb(1, 0, frame(10, 0), 10)
		}), records: 1},
		{name: "ng caplen beyond block", raw: ng(func(b *ngBuilder) {
			b.idb(1, 0)
			body := le.AppendUint32(nil, 0)
			body = append(body, make([]byte, 8)...)
			body = le.AppendUint32(body, 100)
			body = le.AppendUint32(body, 100)
			b.block(ngEPB, append(body, make([]byte, 8)...))
		})},
		{name: "ng block too big", raw: ng(func(b *ngBuilder) {
			b.idb(1, 0)
			b.buf.Write(le.AppendUint32(le.AppendUint32(nil, ngEPB), 1<<30))
		}), tooBig: true},
		{name: "ng bad tsresol", raw: ng(func(b *ngBuilder) { b.idb(1, 0, b.opt(optIfTsresol, []byte{30})) })},
		{name: "ng option overrun", raw: ng(func(b *ngBuilder) {
			b.block(ngIDB, append(make([]byte, 8), 9, 0, 200, 0))
		})},
		{name: "ng version 2", raw: func() []byte {
			r := ng(func(*ngBuilder) {})
			r[12] = 2
			return r
		}()},
		{name: "ng truncated block", raw: ng(func(b *ngBuilder) {
			b.idb(1, 0)
			b.buf.Write(le.AppendUint32(le.AppendUint32(nil, ngEPB), 64))
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(t, c.raw)
			if err == nil {
				t.Fatalf("no error; %d records", len(got))
			}
			if len(got) != c.records {
				t.Errorf("%d records before the error, want %d", len(got), c.records)
			}
			t.Log(err)
			if c.tooBig != errors.Is(err, ErrTooLarge) {
				t.Errorf("error %v: too large %v, want %v", err, errors.Is(err, ErrTooLarge), c.tooBig)
			}
		})
	}
}
