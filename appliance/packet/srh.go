package packet

import (
	"encoding/binary"
	"net/netip"
)

// SRH is a Segment Routing Header (RFC 8754 §2), Routing header type 4:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Next Header   |  Hdr Ext Len  | Routing Type  | Segments Left |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Last Entry   |     Flags     |              Tag              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	|            Segment List[0] (128-bit IPv6 address)             |
//	|                                                               |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	|                                                               |
//	                              ...
//	|                                                               |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	|            Segment List[n] (128-bit IPv6 address)             |
//	|                                                               |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	//                                                             //
//	//         Optional Type Length Value objects (variable)       //
//	//                                                             //
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The list is in reverse order of travel: Segment List[0] is the last segment,
// and Segments Left indexes the active one. Validate it once; the other
// accessors then read without checks.
type SRH []byte

// SRH constants.
const (
	RoutingTypeSRH = 4
	SRHMinLen      = 8
	// SRHMaxSegments is the most segments a Hdr Ext Len of 255 can carry.
	SRHMaxSegments = 127

	srhSegmentsLeft = 3
	srhLastEntry    = 4
	srhFlags        = 5
	srhTag          = 6
	srhSegments     = 8

	// SRH TLV types (RFC 8754 §2.1).
	SRHTLVPad1 = 0
	SRHTLVPadN = 4
	SRHTLVHMAC = 5
)

// Validate checks the whole header: its length against len(b), the routing type,
// that the segment list fits the header, that Segments Left is at most Last
// Entry + 1 (RFC 8754 §4.3.1.1), and that the TLVs end exactly at the header's
// end.
func (b SRH) Validate() error {
	if err := b.validateFixed(); err != nil {
		return err
	}
	it := b.TLVs()
	for {
		if _, ok := it.Next(); !ok {
			return it.Err()
		}
	}
}

// validateFixed is Validate without the TLV walk: what Parse checks.
func (b SRH) validateFixed() error {
	if len(b) < SRHMinLen {
		return ErrTruncated
	}
	if b.Len() > len(b) {
		return ErrExtTooLong
	}
	if b[2] != RoutingTypeSRH {
		return ErrBadSRH
	}
	return checkSRH(b[1], b[srhSegmentsLeft], b[srhLastEntry])
}

// checkSRH checks the segment list against Hdr Ext Len, and Segments Left.
func checkSRH(hdrExtLen, segLeft, lastEntry uint8) error {
	if int(lastEntry)*2+2 > int(hdrExtLen) || int(segLeft) > int(lastEntry)+1 {
		return ErrBadSRH
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b SRH) IsValid() bool { return b.Validate() == nil }

// NextHeader is the type of the next header.
func (b SRH) NextHeader() uint8 { return b[0] }

// HdrExtLen is the length in 8-byte units, less one.
func (b SRH) HdrExtLen() uint8 { return b[1] }

// Len is the header's length in bytes.
func (b SRH) Len() int { return (int(b[1]) + 1) * 8 }

// RoutingType is 4 for a valid SRH.
func (b SRH) RoutingType() uint8 { return b[2] }

// SegmentsLeft indexes the active segment.
func (b SRH) SegmentsLeft() uint8 { return b[srhSegmentsLeft] }

// LastEntry is the index of the last element of the segment list.
func (b SRH) LastEntry() uint8 { return b[srhLastEntry] }

// NumSegments is the number of segments in the list: Last Entry + 1.
func (b SRH) NumSegments() int { return int(b[srhLastEntry]) + 1 }

// Flags is the Flags byte.
func (b SRH) Flags() uint8 { return b[srhFlags] }

// Tag is the Tag field.
func (b SRH) Tag() uint16 { return binary.BigEndian.Uint16(b[srhTag:]) }

// Segment is Segment List[i]; i < NumSegments.
func (b SRH) Segment(i int) [16]byte {
	off := srhSegments + i*16
	return [16]byte(b[off : off+16])
}

// SegmentAddr is Segment List[i] as a netip.Addr.
func (b SRH) SegmentAddr(i int) netip.Addr { return netip.AddrFrom16(b.Segment(i)) }

// ActiveSegment is Segment List[Segments Left]; ok is false when Segments Left is
// beyond the list, as in a reduced SRH that leaves out the first segment (RFC
// 8754 §4.1.1), whose active segment is then only in the IPv6 destination.
func (b SRH) ActiveSegment() (seg [16]byte, ok bool) {
	sl := int(b[srhSegmentsLeft])
	if sl >= b.NumSegments() {
		return seg, false
	}
	return b.Segment(sl), true
}

// SetNextHeader sets the type of the next header.
func (b SRH) SetNextHeader(v uint8) { b[0] = v }

// SetSegmentsLeft sets Segments Left.
func (b SRH) SetSegmentsLeft(v uint8) { b[srhSegmentsLeft] = v }

// SetFlags sets the Flags byte.
func (b SRH) SetFlags(v uint8) { b[srhFlags] = v }

// SetTag sets the Tag.
func (b SRH) SetTag(v uint16) { binary.BigEndian.PutUint16(b[srhTag:], v) }

// SetSegment sets Segment List[i].
func (b SRH) SetSegment(i int, a [16]byte) {
	off := srhSegments + i*16
	copy(b[off:off+16], a[:])
}

// TLVArea is the bytes after the segment list, up to the header's end.
func (b SRH) TLVArea() []byte { return b[srhSegments+b.NumSegments()*16 : b.Len()] }

// TLVs iterates over the TLVs, padding included.
func (b SRH) TLVs() SRHTLVIter { return SRHTLVIter{b: b.TLVArea()} }

// SRHTLV is one TLV of an SRH (RFC 8754 §2.1).
type SRHTLV struct {
	Type uint8
	Data []byte // nil for Pad1; aliases the packet when it comes from an iterator
}

// Len is the TLV's encoded length.
func (t SRHTLV) Len() int {
	if t.Type == SRHTLVPad1 {
		return 1
	}
	return 2 + len(t.Data)
}

// SRHTLVIter walks an SRH's TLVs.
type SRHTLVIter struct {
	b   []byte
	off int
	err error
}

// Next returns the next TLV. It returns false at the end, and when a TLV runs
// past the header's end, in which case Err says so.
func (it *SRHTLVIter) Next() (SRHTLV, bool) {
	if it.off >= len(it.b) || it.err != nil {
		return SRHTLV{}, false
	}
	t := it.b[it.off]
	if t == SRHTLVPad1 {
		it.off++
		return SRHTLV{Type: t}, true
	}
	if it.off+2 > len(it.b) {
		it.err = ErrOptionTooLong
		return SRHTLV{}, false
	}
	end := it.off + 2 + int(it.b[it.off+1])
	if end > len(it.b) {
		it.err = ErrOptionTooLong
		return SRHTLV{}, false
	}
	v := SRHTLV{Type: t, Data: it.b[it.off+2 : end : end]}
	it.off = end
	return v, true
}

// Err is the fault that stopped the iteration, or nil.
func (it *SRHTLVIter) Err() error { return it.err }

// SRHFields are the fields of an SRH, for PutSRH.
type SRHFields struct {
	NextHeader   uint8
	SegmentsLeft uint8
	Flags        uint8
	Tag          uint16
	// Segments is the list in wire order: Segments[0] is the final segment of the
	// path, Segments[len-1] the first to visit. Last Entry is len-1.
	Segments [][16]byte
	// TLVs are written after the list as they are; PutSRH pads their end to 8
	// bytes with Pad1 or PadN.
	TLVs []SRHTLV
}

// Len is the length PutSRH writes.
func (f *SRHFields) Len() int {
	n := srhSegments + 16*len(f.Segments)
	for i := range f.TLVs {
		n += f.TLVs[i].Len()
	}
	return (n + 7) &^ 7
}

// PutSRH writes the SRH described by f into b and returns its length. For a path
// in travel order p[0], p[1], … p[k], Segments is p reversed and SegmentsLeft k at
// the source (RFC 8754 §4.1).
func PutSRH(b []byte, f *SRHFields) (int, error) {
	ns := len(f.Segments)
	if ns == 0 || ns > SRHMaxSegments || int(f.SegmentsLeft) > ns {
		return 0, ErrBadSRH
	}
	n := f.Len()
	if n > ipv6ExtMaxLen {
		return 0, ErrBadLength
	}
	for i := range f.TLVs {
		if len(f.TLVs[i].Data) > 255 {
			return 0, ErrBadLength
		}
	}
	if len(b) < n {
		return 0, ErrNoSpace
	}
	b[0] = f.NextHeader
	b[1] = uint8(n/8 - 1)
	b[2] = RoutingTypeSRH
	b[srhSegmentsLeft] = f.SegmentsLeft
	b[srhLastEntry] = uint8(ns - 1)
	b[srhFlags] = f.Flags
	binary.BigEndian.PutUint16(b[srhTag:], f.Tag)
	off := srhSegments
	for i := range f.Segments {
		off += copy(b[off:off+16], f.Segments[i][:])
	}
	for _, t := range f.TLVs {
		b[off] = t.Type
		if t.Type == SRHTLVPad1 {
			off++
			continue
		}
		b[off+1] = uint8(len(t.Data))
		off += 2 + copy(b[off+2:], t.Data)
	}
	putPadding(b[off:n], SRHTLVPad1, SRHTLVPadN)
	return n, nil
}

// Fields returns the header's fields. It allocates the segment and TLV lists; TLV
// data aliases b. Trailing padding written by PutSRH comes back as TLVs.
func (b SRH) Fields() SRHFields {
	f := SRHFields{
		NextHeader: b.NextHeader(), SegmentsLeft: b.SegmentsLeft(),
		Flags: b.Flags(), Tag: b.Tag(),
		Segments: make([][16]byte, b.NumSegments()),
	}
	for i := range f.Segments {
		f.Segments[i] = b.Segment(i)
	}
	it := b.TLVs()
	for t, ok := it.Next(); ok; t, ok = it.Next() {
		f.TLVs = append(f.TLVs, t)
	}
	return f
}
