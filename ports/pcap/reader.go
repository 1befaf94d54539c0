package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// MaxRecord is the largest captured length a record may have. A longer one is an
// error, not an allocation: a corrupt length field must not cost memory.
const MaxRecord = 256 << 10

// maxBlock bounds the pcapng blocks the reader holds whole (SHB, IDB, EPB, SPB,
// OPB): a packet block is its record plus headers and options.
const maxBlock = MaxRecord + 64<<10

// readBufSize is the bufio buffer: a whole block always fits, so records are
// peeked in place and never copied into a second buffer.
const readBufSize = 512 << 10

// Magic numbers.
const (
	magicMicros    = 0xa1b2c3d4 // classic pcap, µs timestamps
	magicNanos     = 0xa1b23c4d // classic pcap, ns timestamps
	ngSHB          = 0x0a0d0d0a // pcapng Section Header Block
	ngByteOrder    = 0x1a2b3c4d // pcapng byte-order magic
	ngIDB          = 1
	ngOPB          = 2 // obsolete Packet Block
	ngSPB          = 3
	ngEPB          = 6
	linkTypeEther  = 1
	optEndOfOpt    = 0
	optIfTsresol   = 9
	optIfTsoffset  = 14
	pcapHeaderLen  = 24
	pcapRecHdrLen  = 16
	ngBlockHdrLen  = 8 // type and total length; 4 more trail the body
	ngMinBlockLen  = 12
	ngSHBFixedLen  = 16 // BOM, major, minor, section length
	ngIDBFixedLen  = 8
	ngEPBFixedLen  = 20
	ngSPBFixedLen  = 4
	ngOPBFixedLen  = 20
	maxInterfaces  = 1 << 16 // per section, so a hostile file cannot grow the table without bound
	pow10Capacity  = 20      // 10^0 … 10^19 fit a uint64
	maxBinaryShift = 63
)

// Errors of the readers.
var (
	ErrFormat   = errors.New("not a pcap or pcapng file")
	ErrTooLarge = errors.New("record larger than 256 KiB")
)

// record is one captured packet. data aliases the reader's buffer and is valid
// until the next call to next.
type record struct {
	data     []byte
	ts       int64 // Unix ns
	origLen  int
	linkType uint16
}

// iface is what a pcapng Interface Description Block says about timestamps.
type iface struct {
	linkType uint16
	snaplen  uint32
	// A timestamp is ts * mul / div ns when binary is false (if_tsresol 10^-k),
	// or (ts >> shift) s + (ts & mask) * 1e9 >> shift ns when it is true (2^-k).
	binary   bool
	mul, div uint64
	shift    uint
	offsetNs int64 // if_tsoffset
}

// reader reads pcap or pcapng records from a stream, detected by magic. It reads
// through a bufio.Reader and hands out records that point into its buffer, so
// reading allocates nothing once the stream is open.
type reader struct {
	br      *bufio.Reader
	pending int // bytes of the last record still to discard
	ng      bool
	order   binary.ByteOrder
	// classic pcap
	nanos    bool
	linkType uint16
	// pcapng
	ifaces []iface
	lastTs int64 // SPBs carry no timestamp: they take the previous packet's
}

func newReader(r io.Reader) (*reader, error) {
	rd := &reader{br: bufio.NewReaderSize(r, readBufSize)}
	if err := rd.start(); err != nil {
		return nil, err
	}
	return rd, nil
}

// reset starts over on a stream (the same file, rewound, for looping).
func (r *reader) reset(src io.Reader) error {
	r.br.Reset(src)
	r.pending = 0
	r.ifaces = r.ifaces[:0]
	r.lastTs = 0
	return r.start()
}

func (r *reader) start() error {
	head, err := r.br.Peek(4)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, eofIsUnexpected(err))
	}
	switch m := binary.LittleEndian.Uint32(head); {
	case m == ngSHB:
		r.ng = true
		return nil // next reads the SHB like any other block
	case m == magicMicros || m == magicNanos:
		r.order = binary.LittleEndian
	case bits.ReverseBytes32(m) == magicMicros || bits.ReverseBytes32(m) == magicNanos:
		r.order = binary.BigEndian
	default:
		return fmt.Errorf("%w: magic %#08x", ErrFormat, m)
	}
	h, err := r.br.Peek(pcapHeaderLen)
	if err != nil {
		return fmt.Errorf("pcap header: %w", eofIsUnexpected(err))
	}
	r.nanos = r.order.Uint32(h) == magicNanos
	if major := r.order.Uint16(h[4:]); major != 2 {
		return fmt.Errorf("pcap version %d.%d not supported", major, r.order.Uint16(h[6:]))
	}
	// The upper bits of the link-type field carry FCS information (pcap spec §4).
	r.linkType = uint16(r.order.Uint32(h[20:]))
	_, _ = r.br.Discard(pcapHeaderLen)
	return nil
}

// next returns the next record, or io.EOF at a clean end of the stream.
func (r *reader) next() (record, error) {
	if r.pending > 0 {
		if _, err := r.br.Discard(r.pending); err != nil {
			return record{}, err
		}
		r.pending = 0
	}
	if r.ng {
		return r.nextNg()
	}
	return r.nextPcap()
}

func (r *reader) nextPcap() (record, error) {
	h, err := r.br.Peek(pcapRecHdrLen)
	if err != nil {
		if err == io.EOF && len(h) == 0 {
			return record{}, io.EOF
		}
		return record{}, fmt.Errorf("pcap record header: %w", eofIsUnexpected(err))
	}
	sec := int64(r.order.Uint32(h))
	sub := int64(r.order.Uint32(h[4:]))
	capLen := r.order.Uint32(h[8:])
	origLen := r.order.Uint32(h[12:])
	if capLen > MaxRecord {
		return record{}, fmt.Errorf("pcap record of %d bytes: %w", capLen, ErrTooLarge)
	}
	if !r.nanos {
		sub *= 1000
	}
	n := pcapRecHdrLen + int(capLen)
	b, err := r.br.Peek(n)
	if err != nil {
		return record{}, fmt.Errorf("pcap record of %d bytes: %w", capLen, eofIsUnexpected(err))
	}
	r.pending = n
	return record{data: b[pcapRecHdrLen:], ts: sec*1e9 + sub, origLen: int(origLen), linkType: r.linkType}, nil
}

func (r *reader) nextNg() (record, error) {
	for {
		h, err := r.br.Peek(ngBlockHdrLen)
		if err != nil {
			if err == io.EOF && len(h) == 0 {
				return record{}, io.EOF
			}
			return record{}, fmt.Errorf("pcapng block header: %w", eofIsUnexpected(err))
		}
		typ := binary.LittleEndian.Uint32(h) // the SHB type reads the same both ways
		if typ == ngSHB {
			if err := r.readSHB(); err != nil {
				return record{}, err
			}
			continue
		}
		if r.order == nil {
			return record{}, fmt.Errorf("pcapng: block before the section header")
		}
		typ = r.order.Uint32(h)
		length := r.order.Uint32(h[4:])
		if length < ngMinBlockLen || length%4 != 0 {
			return record{}, fmt.Errorf("pcapng block type %#x: bad length %d", typ, length)
		}
		switch typ {
		case ngIDB, ngEPB, ngSPB, ngOPB:
		default:
			// Statistics, name resolution, secrets, custom blocks: not ours.
			if _, err := r.br.Discard(int(length)); err != nil {
				return record{}, fmt.Errorf("pcapng block type %#x: %w", typ, eofIsUnexpected(err))
			}
			continue
		}
		if length > maxBlock {
			return record{}, fmt.Errorf("pcapng block type %#x of %d bytes: %w", typ, length, ErrTooLarge)
		}
		blk, err := r.br.Peek(int(length))
		if err != nil {
			return record{}, fmt.Errorf("pcapng block type %#x: %w", typ, eofIsUnexpected(err))
		}
		if r.order.Uint32(blk[length-4:]) != length {
			return record{}, fmt.Errorf("pcapng block type %#x: trailing length differs from %d", typ, length)
		}
		body := blk[ngBlockHdrLen : length-4]
		if typ == ngIDB {
			err := r.readIDB(body)
			_, _ = r.br.Discard(int(length))
			if err != nil {
				return record{}, err
			}
			continue
		}
		rec, err := r.packet(typ, body)
		if err != nil {
			return record{}, err
		}
		r.pending = int(length)
		return rec, nil
	}
}

func (r *reader) readSHB() error {
	h, err := r.br.Peek(ngBlockHdrLen + 4)
	if err != nil {
		return fmt.Errorf("pcapng section header: %w", eofIsUnexpected(err))
	}
	switch binary.LittleEndian.Uint32(h[8:]) {
	case ngByteOrder:
		r.order = binary.LittleEndian
	case bits.ReverseBytes32(ngByteOrder):
		r.order = binary.BigEndian
	default:
		return fmt.Errorf("pcapng section header: bad byte-order magic")
	}
	length := r.order.Uint32(h[4:])
	if length < ngMinBlockLen+ngSHBFixedLen || length%4 != 0 || length > maxBlock {
		return fmt.Errorf("pcapng section header: bad length %d", length)
	}
	blk, err := r.br.Peek(int(length))
	if err != nil {
		return fmt.Errorf("pcapng section header: %w", eofIsUnexpected(err))
	}
	if r.order.Uint32(blk[length-4:]) != length {
		return fmt.Errorf("pcapng section header: trailing length differs from %d", length)
	}
	if major := r.order.Uint16(blk[12:]); major != 1 {
		return fmt.Errorf("pcapng version %d not supported", major)
	}
	r.ifaces = r.ifaces[:0] // interface ids are per section
	_, _ = r.br.Discard(int(length))
	return nil
}

func (r *reader) readIDB(body []byte) error {
	if len(body) < ngIDBFixedLen {
		return fmt.Errorf("pcapng interface description: %d bytes", len(body))
	}
	if len(r.ifaces) >= maxInterfaces {
		return fmt.Errorf("pcapng: more than %d interfaces in a section", maxInterfaces)
	}
	ifc := iface{
		linkType: r.order.Uint16(body),
		snaplen:  r.order.Uint32(body[4:]),
		mul:      1000, div: 1, // if_tsresol defaults to 6: µs
	}
	opts := body[ngIDBFixedLen:]
	for len(opts) >= 4 {
		code, olen := r.order.Uint16(opts), int(r.order.Uint16(opts[2:]))
		if code == optEndOfOpt {
			break
		}
		padded := (olen + 3) &^ 3
		if 4+padded > len(opts) {
			return fmt.Errorf("pcapng interface description: option %d overruns the block", code)
		}
		v := opts[4 : 4+olen]
		switch code {
		case optIfTsresol:
			if olen != 1 {
				return fmt.Errorf("pcapng if_tsresol: %d bytes", olen)
			}
			if err := ifc.setResolution(v[0]); err != nil {
				return err
			}
		case optIfTsoffset:
			if olen != 8 {
				return fmt.Errorf("pcapng if_tsoffset: %d bytes", olen)
			}
			ifc.offsetNs = int64(r.order.Uint64(v)) * 1e9
		}
		opts = opts[4+padded:]
	}
	r.ifaces = append(r.ifaces, ifc)
	return nil
}

func (ifc *iface) setResolution(v byte) error {
	k := uint(v & 0x7f)
	if v&0x80 != 0 {
		if k > maxBinaryShift {
			return fmt.Errorf("pcapng if_tsresol 2^-%d not supported", k)
		}
		ifc.binary, ifc.shift = true, k
		return nil
	}
	switch {
	case k <= 9:
		ifc.mul, ifc.div = pow10(9-k), 1
	case k-9 < pow10Capacity:
		ifc.mul, ifc.div = 1, pow10(k-9)
	default:
		return fmt.Errorf("pcapng if_tsresol 10^-%d not supported", k)
	}
	return nil
}

func pow10(k uint) uint64 {
	v := uint64(1)
	for ; k > 0; k-- {
		v *= 10
	}
	return v
}

// ns turns an interface's timestamp units into Unix ns. Values beyond the int64
// range wrap; a file that claims them gets nonsense times, never a panic.
func (ifc *iface) ns(ts uint64) int64 {
	if ifc.binary {
		sec := ts >> ifc.shift
		frac := ts & (1<<ifc.shift - 1)
		hi, lo := bits.Mul64(frac, 1e9) // frac < 2^shift, so the quotient fits 64 bits
		return int64(sec*1e9+(lo>>ifc.shift|hi<<(64-ifc.shift))) + ifc.offsetNs
	}
	return int64(ts*ifc.mul/ifc.div) + ifc.offsetNs
}

func (r *reader) packet(typ uint32, body []byte) (record, error) {
	var (
		id              uint32
		ts              uint64
		hasTs           = true
		capLen, origLen uint32
		data            []byte
	)
	switch typ {
	case ngEPB:
		if len(body) < ngEPBFixedLen {
			return record{}, fmt.Errorf("pcapng enhanced packet: %d bytes", len(body))
		}
		id = r.order.Uint32(body)
		ts = uint64(r.order.Uint32(body[4:]))<<32 | uint64(r.order.Uint32(body[8:]))
		capLen, origLen = r.order.Uint32(body[12:]), r.order.Uint32(body[16:])
		data = body[ngEPBFixedLen:]
	case ngOPB:
		if len(body) < ngOPBFixedLen {
			return record{}, fmt.Errorf("pcapng packet block: %d bytes", len(body))
		}
		id = uint32(r.order.Uint16(body))
		ts = uint64(r.order.Uint32(body[4:]))<<32 | uint64(r.order.Uint32(body[8:]))
		capLen, origLen = r.order.Uint32(body[12:]), r.order.Uint32(body[16:])
		data = body[ngOPBFixedLen:]
	case ngSPB:
		if len(body) < ngSPBFixedLen {
			return record{}, fmt.Errorf("pcapng simple packet: %d bytes", len(body))
		}
		hasTs = false
		origLen = r.order.Uint32(body)
		data = body[ngSPBFixedLen:]
		// The captured length is implied: the original length, cut by the
		// interface's snaplen and by the block itself (pcapng §4.4).
		capLen = origLen
		if len(r.ifaces) > 0 && r.ifaces[0].snaplen != 0 && capLen > r.ifaces[0].snaplen {
			capLen = r.ifaces[0].snaplen
		}
		if capLen > uint32(len(data)) {
			capLen = uint32(len(data))
		}
	}
	if int(id) >= len(r.ifaces) {
		return record{}, fmt.Errorf("pcapng packet on interface %d of %d", id, len(r.ifaces))
	}
	if capLen > MaxRecord {
		return record{}, fmt.Errorf("pcapng packet of %d bytes: %w", capLen, ErrTooLarge)
	}
	if capLen > uint32(len(data)) {
		return record{}, fmt.Errorf("pcapng packet of %d bytes in a %d-byte block", capLen, len(data))
	}
	ifc := &r.ifaces[id]
	if hasTs {
		r.lastTs = ifc.ns(ts)
	}
	return record{data: data[:capLen], ts: r.lastTs, origLen: int(origLen), linkType: ifc.linkType}, nil
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
