package ioam

import (
	"encoding/binary"

	"github.com/linerate/linerate/appliance/packet"
)

// Options headers in the kernel's layout (net/ipv6/ioam6_iptunnel.c): next
// header and length, a 2-byte PadN so the first IOAM option starts 4n-aligned
// (RFC 9486 §4), the IOAM options, each a multiple of 4 bytes, then a PadN to
// the header's 8-byte multiple.

// maxOptionsHeader is the longest options header Hdr Ext Len can describe.
const maxOptionsHeader = 256 * 8

// freshHeaderLen is the length of a new options header holding an option
// block of n bytes.
func freshHeaderLen(n int) int { return (4 + n + 7) &^ 7 }

// putPad fills b with one Pad1 or a PadN of zeros.
func putPad(b []byte) {
	switch len(b) {
	case 0:
	case 1:
		b[0] = packet.IPv6OptPad1
	default:
		b[0] = packet.IPv6OptPadN
		b[1] = uint8(len(b) - 2)
		clear(b[2:])
	}
}

// putFreshHeader writes a new options header holding block into b, which is
// freshHeaderLen(len(block)) bytes, and returns the block's offset in it (4).
func putFreshHeader(b []byte, next uint8, block []byte) int {
	b[0], b[1] = next, uint8(len(b)/8-1)
	b[2], b[3] = packet.IPv6OptPadN, 0
	copy(b[4:], block)
	putPad(b[4+len(block):])
	return 4
}

// optionsEnd is the offset, in the options header h, one past its last
// option that is not padding (2 when there is none).
func optionsEnd(h []byte) int {
	end := 2
	for i := 2; i < len(h); {
		t := h[i]
		if t == packet.IPv6OptPad1 {
			i++
			continue
		}
		if i+2 > len(h) {
			break
		}
		i += 2 + int(h[i+1])
		if t != packet.IPv6OptPadN {
			end = i
		}
	}
	return min(end, len(h))
}

// checkHeader checks the options header at off of d, in an IPv6 packet that
// ends at end, as the kernel's ip6_parse_tlv would before inline encap grows
// it: the header ends inside the packet, and each of its options inside it.
func checkHeader(d []byte, off, end int) error {
	if end-off < 8 {
		return ErrHopByHop
	}
	n := (int(d[off+1]) + 1) * 8
	if n > end-off {
		return ErrHopByHop
	}
	h := d[off : off+n]
	for i := 2; i < n; {
		if h[i] == packet.IPv6OptPad1 {
			i++
			continue
		}
		if i+2 > n || i+2+int(h[i+1]) > n {
			return ErrOptionOverrun
		}
		i += 2 + int(h[i+1])
	}
	return nil
}

// growHeader appends block, 4n-aligned, to the options header at off of
// packet i of b, replacing the header's trailing padding, and returns the
// block's offset in the packet's data and the bytes added. The packet may be
// replaced by a copy (Burst.InsertGap) when its buffer has no room.
func growHeader(b *packet.Burst, i, off int, block []byte, f packet.Freer) (at, added int, err error) {
	d := b.H[i].P().Data()
	if len(d)-off < 8 {
		return 0, 0, ErrHopByHop
	}
	old := (int(d[off+1]) + 1) * 8
	if old > len(d)-off {
		return 0, 0, ErrHopByHop
	}
	end := optionsEnd(d[off : off+old])
	pos := (end + 3) &^ 3
	newLen := max((pos+len(block)+7)&^7, old)
	if newLen > maxOptionsHeader {
		return 0, 0, ErrHeaderTooLong
	}
	added = newLen - old
	if added > 0 {
		if _, err := b.InsertGap(i, off+end, added, f); err != nil {
			return 0, 0, ErrNoRoom
		}
		d = b.H[i].P().Data()
	}
	h := d[off : off+newLen]
	h[1] = uint8(newLen/8 - 1)
	putPad(h[end:pos])
	copy(h[pos:], block)
	putPad(h[pos+len(block):])
	return off + pos, added, nil
}

// ownOption reports whether the IOAM option o, which scanHeader checked, is
// one this node takes out: of an IOAM type it knows, in a namespace of ns.
func ownOption(o []byte, ns *nsTable) bool {
	if len(o) < OptionHeaderLen+2 {
		return false
	}
	switch o[3] {
	case TypePreallocatedTrace, TypeIncrementalTrace, TypePOT, TypeE2E, TypeDEX:
		return ns.lookup(binary.BigEndian.Uint16(o[OptionHeaderLen:])) != nil
	}
	return false
}

// onlyOwn reports whether the options header h, which scanHeader checked,
// holds nothing but padding and options ownOption takes out.
func onlyOwn(h []byte, ns *nsTable) bool {
	for i := 2; i < len(h); {
		t := h[i]
		if t == packet.IPv6OptPad1 {
			i++
			continue
		}
		ol := 2 + int(h[i+1])
		if t != packet.IPv6OptPadN && !(IsIOAM(t) && ownOption(h[i:i+ol], ns)) {
			return false
		}
		i += ol
	}
	return true
}

// stripHeader removes the IOAM options of the namespaces in ns (with the
// padding around them) from the options header at off of p, closing the room
// in multiples of 8 bytes so the other options keep their alignment, and
// returns the bytes removed. Options of other namespaces stay. The header
// must have been checked by scanHeader.
func stripHeader(p *packet.Packet, off int, ns *nsTable) (int, error) {
	d := p.Data()
	n := (int(d[off+1]) + 1) * 8
	removed := 0
	// Runs of IOAM and padding options, from the last: removing one does not
	// move the ones before it.
	var runs [8][2]int
	nr := 0
	start, hasIOAM := -1, false
	flush := func(end int) {
		if start >= 0 && hasIOAM && nr < len(runs) {
			runs[nr] = [2]int{start, end}
			nr++
		}
		start, hasIOAM = -1, false
	}
	h := d[off : off+n]
	for i := 2; i < n; {
		t := h[i]
		ol := 1
		if t != packet.IPv6OptPad1 {
			ol = 2 + int(h[i+1])
		}
		switch {
		case t == packet.IPv6OptPad1 || t == packet.IPv6OptPadN:
			if start < 0 {
				start = i
			}
		case IsIOAM(t) && ownOption(h[i:i+ol], ns):
			if start < 0 {
				start = i
			}
			hasIOAM = true
		default:
			flush(i)
		}
		i += ol
	}
	flush(n)
	for r := nr - 1; r >= 0; r-- {
		r0, r1 := runs[r][0], runs[r][1]
		k := (r1 - r0) &^ 7
		keep := r1 - r0 - k
		putPad(d[off+r0 : off+r0+keep])
		if k > 0 {
			if err := p.RemoveGap(off+r0+keep, k); err != nil {
				return removed, err
			}
			d = p.Data()
			removed += k
		}
	}
	n -= removed
	d[off+1] = uint8(n/8 - 1)
	return removed, nil
}

// removeHeader removes the options header of n bytes at off from p, giving
// its next header to the field at prev (the IPv6 header's, or the header's
// before it), and returns the bytes removed.
func removeHeader(p *packet.Packet, prev, off, n int) int {
	d := p.Data()
	d[prev] = d[off]
	if p.RemoveGap(off, n) != nil {
		return 0
	}
	return n
}

// addPayloadLength adds n to the IPv6 payload length of the header at l3.
func addPayloadLength(d []byte, l3, n int) {
	pl := binary.BigEndian.Uint16(d[l3+4:])
	binary.BigEndian.PutUint16(d[l3+4:], uint16(int(pl)+n))
}
