package route

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// IPv4 fragmentation (RFC 791 §3.2, RFC 1812 §4.2.2.7, §5.2.6). A router must
// fragment an IPv4 packet larger than the output link's MTU unless it has
// Don't Fragment set; the destination reassembles. linerate does that for
// the few packets that need it: the later fragments are new buffers of the
// output port's pool, the first is the packet itself, cut short, so its data
// is not copied.

// minMTU4 is the smallest MTU IPv4 allows (RFC 791): room for the longest
// header and 8 bytes of data, so that any packet can be fragmented.
const minMTU4 = 68

// copiedOptionsMax is the most the copied options of a later fragment take.
const copiedOptionsMax = 40

// copiedOptions writes into dst the options of opts that every fragment
// carries (the copy flag, RFC 791 §3.1), padded with zeros to 4-byte units,
// and returns their length. A malformed option ends them.
func copiedOptions(dst, opts []byte) int {
	n := 0
	it := options4{b: opts} // No Operation is never copied
	for o, ok := it.next(); ok; o, ok = it.next() {
		if o[0]&0x80 != 0 {
			n += copy(dst[n:], o)
		}
	}
	for ; n%4 != 0; n++ {
		dst[n] = 0
	}
	return n
}

// fragment splits the routed IPv4 packet in p (Ethernet header at 0, IP header
// at l3, TTL already decremented and MACs rewritten for out) into fragments
// that fit out's MTU. It emits the later ones towards out and leaves p as the
// first. It returns how many fragments it made, p included, and false when
// out's pool ran dry: p is then untouched and the fragments made so far are
// gone (emitted or freed), so the caller drops p.
func (f *forwarder) fragment(ctx *plugins.Context, p *packet.Packet, out *Port, l3 int) (int, bool) {
	d := p.Data()
	ip := packet.IPv4(d[l3:])
	hl, total := ip.HeaderLen(), int(ip.TotalLength())
	flags, offset := ip.Flags(), int(ip.FragmentOffset())
	mtu := out.MTU
	first := (mtu - hl) &^ 7
	var opts [copiedOptionsMax]byte
	ol := copiedOptions(opts[:], d[l3+packet.IPv4MinLen:l3+hl])
	hl2 := packet.IPv4MinLen + ol
	per := (mtu - hl2) &^ 7
	n := 1
	for at := hl + first; at < total; at += per {
		size := min(per, total-at)
		h, q, ok := alloc(out, max(l3+hl2+size, minFrame))
		if !ok {
			return n, false
		}
		copy(q, d[:l3+packet.IPv4MinLen])
		copy(q[l3+packet.IPv4MinLen:], opts[:ol])
		copy(q[l3+hl2:], d[l3+at:l3+at+size])
		clear(q[l3+hl2+size:])
		fip := packet.IPv4(q[l3:])
		fip[0] = 0x40 | byte(hl2/4)
		fip.SetTotalLength(uint16(hl2 + size))
		more := flags & packet.IPv4FlagMoreFragments
		if at+size < total {
			more = packet.IPv4FlagMoreFragments
		}
		fip.SetFlagsFragmentOffset(more, uint16(offset+at-hl))
		fip.SetChecksum(fip.CalculateChecksum())
		h.P().InPort = p.InPort
		ctx.Emit(h, out.ID)
		n++
	}
	// The packet itself is the first fragment.
	_ = p.Trim(len(d) - max(l3+hl+first, minFrame))
	clear(d[l3+hl+first : max(l3+hl+first, minFrame)])
	ip.SetTotalLength(uint16(hl + first))
	ip.SetFlagsFragmentOffset(packet.IPv4FlagMoreFragments, uint16(offset))
	ip.SetChecksum(ip.CalculateChecksum())
	return n, true
}
