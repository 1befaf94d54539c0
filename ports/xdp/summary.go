package xdp

import "encoding/binary"

// The pass path's summary (struct summary in bpf/dispatcher.c): what the
// rules in force could take, per IP version and, for IPv6, per presence of
// extension headers, so that the dispatcher decides most of the host's own
// traffic XDP_PASS on its first headers (IPv4, IPv6 without extension
// headers) or once parsed (IPv6 with them), without walking the rules. It is
// a superset: a packet the summary rules out is one no rule takes, and every
// other packet meets the rules.
const (
	summarySize = 8 + 32 + 8*32 + 65536/8

	sNonIP   = 1 << 0 // a rule takes frames that are neither IPv4 nor IPv6
	sUDPAny4 = 1 << 1 // a rule may take IPv4 UDP to any destination port
)

type summary struct {
	flags   uint32
	udpAny6 uint8 // bit p: a rule may take IPv6 UDP to any destination port, presence p
	proto4  [4]uint64
	// proto6[p]: the next headers a rule may take in IPv6 with presence p: a
	// Hop-by-Hop header (bit 0), an SRH (bit 1), an IOAM option (bit 2).
	proto6 [8][4]uint64
	udpDst [65536 / 64]uint64
}

// summarize is the summary of rs. A packet is what parse makes of it: IPv4
// has neither a Hop-by-Hop header, nor an SRH, nor an IOAM option; IPv6
// has those its extension headers hold. A rule may take a packet only if its
// Hop-by-Hop, SRH and IOAM fields allow what the packet has; then, if it
// names no protocol, any protocol, and if it names UDP ports but no
// protocol, only UDP. Frames that are neither IPv4 nor IPv6 parse as
// protocol 0 with nothing present, the same for all of them, so whether a
// rule takes them is known here exactly.
func summarize(rs []Rule) summary {
	var s summary
	for _, r := range rs {
		v4 := !r.DstPrefix.IsValid() || r.DstPrefix.Addr().Is4()
		v6 := !r.DstPrefix.IsValid() || !r.DstPrefix.Addr().Is4()
		if accepts(r, 0) && !r.DstPrefix.IsValid() && r.UDPDstPort == nil && r.UDPSrcPort == nil &&
			(r.NextHeader == nil || *r.NextHeader == 0) {
			s.flags |= sNonIP
		}
		if v4 && accepts(r, 0) && s.add(r, &s.proto4) {
			s.flags |= sUDPAny4
		}
		for p := range s.proto6 {
			if v6 && accepts(r, p) && s.add(r, &s.proto6[p]) {
				s.udpAny6 |= 1 << p
			}
		}
	}
	return s
}

// accepts reports whether r's Hop-by-Hop, SRH and IOAM fields allow a
// packet with presence p (bit 0, 1, 2).
func accepts(r Rule, p int) bool {
	for i, v := range []*bool{r.HopByHop, r.SRH, r.IOAM} {
		if v != nil && *v != (p>>i&1 == 1) {
			return false
		}
	}
	return true
}

// add puts the protocols r may take into protos, and the UDP destination
// port it names into the port bitmap; it reports whether r may take UDP to
// any port.
func (s *summary) add(r Rule, protos *[4]uint64) (anyUDP bool) {
	udp := r.UDPDstPort != nil || r.UDPSrcPort != nil
	switch {
	case r.NextHeader != nil:
		setBit(protos[:], *r.NextHeader)
	case udp:
		setBit(protos[:], 17)
	default:
		*protos = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	}
	if r.NextHeader != nil && *r.NextHeader != 17 {
		return false // takes no UDP
	}
	if r.UDPDstPort == nil {
		return true
	}
	setBit(s.udpDst[:], *r.UDPDstPort)
	return false
}

func setBit(words []uint64, n int) { words[n/64] |= 1 << (n % 64) }

// encode is s as the dispatcher's struct summary.
func (s summary) encode() []byte {
	b := make([]byte, summarySize)
	binary.NativeEndian.PutUint32(b, s.flags)
	b[4] = s.udpAny6
	at := 8
	put := func(words []uint64) {
		for _, w := range words {
			binary.NativeEndian.PutUint64(b[at:], w)
			at += 8
		}
	}
	put(s.proto4[:])
	for p := range s.proto6 {
		put(s.proto6[p][:])
	}
	put(s.udpDst[:])
	return b
}
