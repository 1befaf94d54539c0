package xdp

import "encoding/binary"

// The pass path's summary (struct summary in bpf/dispatcher.c): what the
// rules in force could take, per family, so that the dispatcher decides most
// of the host's own traffic XDP_PASS on its first headers, without walking
// the rules. It is a superset: a packet the summary rules out is one no rule
// takes, and every other packet meets the rules.
const (
	summarySize = 8 + 32 + 32 + 65536/8

	sNonIP   = 1 << 0 // a rule takes frames that are neither IPv4 nor IPv6
	sUDPAny4 = 1 << 1 // a rule may take IPv4 UDP to any destination port
	sUDPAny6 = 1 << 2 // a rule may take IPv6 UDP to any destination port
)

type summary struct {
	flags  uint32
	proto  [2][256 / 64]uint64 // [IPv4, IPv6 without extension headers]
	udpDst [65536 / 64]uint64
}

func setBit(words []uint64, n int) { words[n/64] |= 1 << (n % 64) }

// summarize is the summary of rs. IPv4, and IPv6 without extension headers,
// have neither a Hop-by-Hop header, nor an SRH, nor an IOAM option: a rule
// that wants one present cannot take them. A rule that names no protocol may
// take any; one with UDP ports but no protocol, only UDP. Frames that are
// neither IPv4 nor IPv6 parse as protocol 0 with nothing present, the same
// for all of them, so whether a rule takes them is known here exactly.
func summarize(rs []Rule) summary {
	var s summary
	for _, r := range rs {
		if wantsPresent(r) {
			continue // only packets with extension headers, which the rules decide
		}
		udp := r.UDPDstPort != nil || r.UDPSrcPort != nil
		if !r.DstPrefix.IsValid() && !udp && (r.NextHeader == nil || *r.NextHeader == 0) {
			s.flags |= sNonIP
		}
		for fam, any := range [2]uint32{sUDPAny4, sUDPAny6} {
			if r.DstPrefix.IsValid() && r.DstPrefix.Addr().Is4() != (fam == 0) {
				continue
			}
			switch {
			case r.NextHeader != nil:
				setBit(s.proto[fam][:], *r.NextHeader)
			case udp:
				setBit(s.proto[fam][:], 17)
			default:
				s.proto[fam] = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
			}
			if r.NextHeader != nil && *r.NextHeader != 17 {
				continue // takes no UDP
			}
			if r.UDPDstPort != nil {
				setBit(s.udpDst[:], *r.UDPDstPort)
			} else {
				s.flags |= any
			}
		}
	}
	return s
}

// wantsPresent reports whether r takes only packets with a Hop-by-Hop
// header, an SRH or an IOAM option.
func wantsPresent(r Rule) bool {
	for _, v := range []*bool{r.HopByHop, r.SRH, r.IOAM} {
		if v != nil && *v {
			return true
		}
	}
	return false
}

// encode is s as the dispatcher's struct summary.
func (s summary) encode() []byte {
	b := make([]byte, summarySize)
	binary.NativeEndian.PutUint32(b, s.flags)
	at := 8
	for _, words := range [][]uint64{s.proto[0][:], s.proto[1][:], s.udpDst[:]} {
		for _, w := range words {
			binary.NativeEndian.PutUint64(b[at:], w)
			at += 8
		}
	}
	return b
}
