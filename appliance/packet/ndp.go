package packet

import (
	"encoding/binary"
	"errors"
)

// Neighbor Discovery (RFC 4861). Each message view holds the whole ICMPv6
// message, from its Type field, so ICMPv6(b) reads the common header and
// computes the checksum; the options follow the fixed part and are walked with
// NDPOptions.
//
// A node receiving an ND message validates it (RFC 4861 §6.1, §7.1): Hop Limit
// 255, a right checksum, Code 0, a long enough message and well-formed options.
// Validate checks the last three; the IPv6 header and the checksum are the
// caller's.

// ErrNDPOption is an ND option of length zero or running past the message (RFC
// 4861 §4.6: such a packet is silently discarded).
var ErrNDPOption = errors.New("packet: malformed neighbor discovery option")

// ErrNDPCode is an ND message whose Code is not 0, or whose Type is not the
// view's.
var ErrNDPCode = errors.New("packet: neighbor discovery message of the wrong type or code")

// NDP fixed-part lengths, from the ICMPv6 Type field.
const (
	NDPRouterSolicitLen   = 8
	NDPRouterAdvertLen    = 16
	NDPNeighborSolicitLen = 24
	NDPNeighborAdvertLen  = 24

	ndpTarget = 8
)

// NDP option types (RFC 4861 §4.6, RFC 8106).
const (
	NDPOptSourceLinkAddr = 1
	NDPOptTargetLinkAddr = 2
	NDPOptPrefixInfo     = 3
	NDPOptRedirected     = 4
	NDPOptMTU            = 5
	NDPOptRDNSS          = 25

	// NDPLinkAddrOptLen is a link-layer address option for Ethernet: type,
	// length 1 (8 bytes), and the 6-byte address.
	NDPLinkAddrOptLen = 8
)

// Neighbor Advertisement flags (RFC 4861 §4.4), in the first body byte.
const (
	NDPFlagRouter    = 0x80
	NDPFlagSolicited = 0x40
	NDPFlagOverride  = 0x20
)

func validateND(b []byte, typ uint8, fixed int) error {
	if len(b) < icmpRest {
		return ErrTruncated
	}
	if b[icmpType] != typ || b[icmpCode] != 0 {
		return ErrNDPCode
	}
	if len(b) < fixed {
		return ErrTruncated
	}
	return NDPOptions(b[fixed:]).Validate()
}

// NDPNeighborSolicit is a Neighbor Solicitation (RFC 4861 §4.3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Reserved                            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+                       Target Address                          +
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Options ...
//	+-+-+-+-+-+-+-+-+-+-+-+-
type NDPNeighborSolicit []byte

// Validate checks the type, the code, the length and the options.
func (b NDPNeighborSolicit) Validate() error {
	return validateND(b, ICMPv6NeighborSolicit, NDPNeighborSolicitLen)
}

// Reserved is the Reserved field.
func (b NDPNeighborSolicit) Reserved() uint32 { return binary.BigEndian.Uint32(b[icmpRest:]) }

// Target is the Target Address.
func (b NDPNeighborSolicit) Target() [16]byte { return [16]byte(b[ndpTarget : ndpTarget+16]) }

// SetTarget sets the Target Address.
func (b NDPNeighborSolicit) SetTarget(a [16]byte) { copy(b[ndpTarget:ndpTarget+16], a[:]) }

// Options are the message's options.
func (b NDPNeighborSolicit) Options() NDPOptions { return NDPOptions(b[NDPNeighborSolicitLen:]) }

// NDPNeighborAdvert is a Neighbor Advertisement (RFC 4861 §4.4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|R|S|O|                     Reserved                            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                       Target Address                          +
//	|                          (16 bytes)                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Options ...
//	+-+-+-+-+-+-+-+-+-+-+-+-
type NDPNeighborAdvert []byte

// Validate checks the type, the code, the length and the options.
func (b NDPNeighborAdvert) Validate() error {
	return validateND(b, ICMPv6NeighborAdvert, NDPNeighborAdvertLen)
}

// Flags are the R, S and O bits (NDPFlag*) with the reserved bits after them:
// the first body word.
func (b NDPNeighborAdvert) Flags() uint32 { return binary.BigEndian.Uint32(b[icmpRest:]) }

// Router is the R flag: the sender is a router.
func (b NDPNeighborAdvert) Router() bool { return b[icmpRest]&NDPFlagRouter != 0 }

// Solicited is the S flag: the advertisement answers a solicitation.
func (b NDPNeighborAdvert) Solicited() bool { return b[icmpRest]&NDPFlagSolicited != 0 }

// Override is the O flag: the target link-layer address replaces a cached one.
func (b NDPNeighborAdvert) Override() bool { return b[icmpRest]&NDPFlagOverride != 0 }

// Target is the Target Address.
func (b NDPNeighborAdvert) Target() [16]byte { return [16]byte(b[ndpTarget : ndpTarget+16]) }

// SetFlags sets the first body word: R, S and O (NDPFlag*) in its high byte.
func (b NDPNeighborAdvert) SetFlags(v uint32) { binary.BigEndian.PutUint32(b[icmpRest:], v) }

// SetTarget sets the Target Address.
func (b NDPNeighborAdvert) SetTarget(a [16]byte) { copy(b[ndpTarget:ndpTarget+16], a[:]) }

// Options are the message's options.
func (b NDPNeighborAdvert) Options() NDPOptions { return NDPOptions(b[NDPNeighborAdvertLen:]) }

// NDPRouterSolicit is a Router Solicitation (RFC 4861 §4.1): Type, Code,
// Checksum, 32 reserved bits, options.
type NDPRouterSolicit []byte

// Validate checks the type, the code, the length and the options.
func (b NDPRouterSolicit) Validate() error {
	return validateND(b, ICMPv6RouterSolicit, NDPRouterSolicitLen)
}

// Reserved is the Reserved field.
func (b NDPRouterSolicit) Reserved() uint32 { return binary.BigEndian.Uint32(b[icmpRest:]) }

// Options are the message's options.
func (b NDPRouterSolicit) Options() NDPOptions { return NDPOptions(b[NDPRouterSolicitLen:]) }

// NDPRouterAdvert is a Router Advertisement (RFC 4861 §4.2, RFC 4191 §2.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Cur Hop Limit |M|O|  Reserved |       Router Lifetime         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Reachable Time                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Retrans Timer                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Options ...
//	+-+-+-+-+-+-+-+-+-+-+-+-
type NDPRouterAdvert []byte

// Validate checks the type, the code, the length and the options.
func (b NDPRouterAdvert) Validate() error {
	return validateND(b, ICMPv6RouterAdvert, NDPRouterAdvertLen)
}

// CurHopLimit is the Cur Hop Limit hosts should use; 0 is unspecified.
func (b NDPRouterAdvert) CurHopLimit() uint8 { return b[4] }

// Flags is the flags byte: M (0x80), O (0x40) and the bits after them.
func (b NDPRouterAdvert) Flags() uint8 { return b[5] }

// RouterLifetime is the default-router lifetime in seconds; 0 is not a default
// router.
func (b NDPRouterAdvert) RouterLifetime() uint16 { return binary.BigEndian.Uint16(b[6:]) }

// ReachableTime is in milliseconds; 0 is unspecified.
func (b NDPRouterAdvert) ReachableTime() uint32 { return binary.BigEndian.Uint32(b[8:]) }

// RetransTimer is in milliseconds; 0 is unspecified.
func (b NDPRouterAdvert) RetransTimer() uint32 { return binary.BigEndian.Uint32(b[12:]) }

// Options are the message's options.
func (b NDPRouterAdvert) Options() NDPOptions { return NDPOptions(b[NDPRouterAdvertLen:]) }

// NDPFields are the fields of any of the four ND messages, for Encode: Rest is
// the first body word (Reserved, or the NA flags, or an RA's hop limit, flags
// and lifetime), Target the NS/NA Target Address, Reachable and Retrans an RA's
// timers. Options alias the packet when they come from Fields.
type NDPFields struct {
	Type      uint8
	Checksum  uint16
	Rest      uint32
	Target    [16]byte
	Reachable uint32
	Retrans   uint32
	Options   []NDPOption
}

// ndpFixedLen is the fixed length of ND message type t, or 0.
func ndpFixedLen(t uint8) int {
	switch t {
	case ICMPv6RouterSolicit:
		return NDPRouterSolicitLen
	case ICMPv6RouterAdvert:
		return NDPRouterAdvertLen
	case ICMPv6NeighborSolicit:
		return NDPNeighborSolicitLen
	case ICMPv6NeighborAdvert:
		return NDPNeighborAdvertLen
	}
	return 0
}

// ParseNDP validates b as the ND message its Type says, and returns its fields.
// The options are appended to opts (pass a stack array's slice to keep it
// allocation-free).
func ParseNDP(b []byte, opts []NDPOption) (NDPFields, error) {
	if len(b) < icmpRest {
		return NDPFields{}, ErrTruncated
	}
	fixed := ndpFixedLen(b[icmpType])
	if fixed == 0 {
		return NDPFields{}, ErrNDPCode
	}
	if err := validateND(b, b[icmpType], fixed); err != nil {
		return NDPFields{}, err
	}
	f := NDPFields{Type: b[icmpType], Checksum: ICMPv6(b).Checksum(), Rest: binary.BigEndian.Uint32(b[icmpRest:])}
	switch f.Type {
	case ICMPv6NeighborSolicit, ICMPv6NeighborAdvert:
		f.Target = [16]byte(b[ndpTarget : ndpTarget+16])
	case ICMPv6RouterAdvert:
		f.Reachable = binary.BigEndian.Uint32(b[8:])
		f.Retrans = binary.BigEndian.Uint32(b[12:])
	}
	it := NDPOptions(b[fixed:]).Iter()
	for o, ok := it.Next(); ok; o, ok = it.Next() {
		opts = append(opts, o)
	}
	f.Options = opts
	return f, nil
}

// Len is the length Encode writes.
func (f *NDPFields) Len() int {
	n := ndpFixedLen(f.Type)
	for _, o := range f.Options {
		n += o.Len()
	}
	return n
}

// Encode writes f into b, Code 0, and returns the length written. An unknown
// type is ErrNDPCode; an option whose data does not fill whole 8-byte units
// with its two header bytes, or is too long, is ErrNDPOption; a short b is
// ErrNoSpace.
func (f *NDPFields) Encode(b []byte) (int, error) {
	fixed := ndpFixedLen(f.Type)
	if fixed == 0 {
		return 0, ErrNDPCode
	}
	n := f.Len()
	if len(b) < n {
		return 0, ErrNoSpace
	}
	b[icmpType] = f.Type
	b[icmpCode] = 0
	binary.BigEndian.PutUint16(b[icmpChecksum:], f.Checksum)
	binary.BigEndian.PutUint32(b[icmpRest:], f.Rest)
	switch f.Type {
	case ICMPv6NeighborSolicit, ICMPv6NeighborAdvert:
		copy(b[ndpTarget:ndpTarget+16], f.Target[:])
	case ICMPv6RouterAdvert:
		binary.BigEndian.PutUint32(b[8:], f.Reachable)
		binary.BigEndian.PutUint32(b[12:], f.Retrans)
	}
	off := fixed
	for _, o := range f.Options {
		k, err := PutNDPOption(b[off:], o.Type, o.Data)
		if err != nil {
			return 0, err
		}
		off += k
	}
	return off, nil
}

// NDPOptions are the options of an ND message (RFC 4861 §4.6):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |    Length     |              ...              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                              ...                              ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Length counts 8-byte units, the two header bytes included; 0 is invalid.
type NDPOptions []byte

// NDPOption is one ND option. Data is what follows the Type and Length bytes,
// padding included; it aliases the packet when it comes from an iterator.
type NDPOption struct {
	Type uint8
	Data []byte
}

// Len is the option's encoded length.
func (o NDPOption) Len() int { return 2 + len(o.Data) }

// Validate checks that every option has a non-zero length and ends within b.
func (b NDPOptions) Validate() error {
	it := b.Iter()
	for {
		if _, ok := it.Next(); !ok {
			return it.Err()
		}
	}
}

// Iter iterates over the options.
func (b NDPOptions) Iter() NDPOptionIter { return NDPOptionIter{b: b} }

// LinkAddr returns the Ethernet address of the first option of type typ
// (NDPOptSourceLinkAddr or NDPOptTargetLinkAddr). ok is false when there is
// none or it is shorter than an Ethernet address; the options must be valid.
func (b NDPOptions) LinkAddr(typ uint8) (m MAC, ok bool) {
	it := b.Iter()
	for o, more := it.Next(); more; o, more = it.Next() {
		if o.Type == typ {
			if len(o.Data) < 6 {
				return MAC{}, false
			}
			return MAC(o.Data[:6]), true
		}
	}
	return MAC{}, false
}

// NDPOptionIter walks ND options.
type NDPOptionIter struct {
	b   []byte
	off int
	err error
}

// Next returns the next option. It returns false at the end, and at a malformed
// option, in which case Err says so.
func (it *NDPOptionIter) Next() (NDPOption, bool) {
	if it.off >= len(it.b) || it.err != nil {
		return NDPOption{}, false
	}
	if len(it.b)-it.off < 2 {
		it.err = ErrNDPOption
		return NDPOption{}, false
	}
	n := int(it.b[it.off+1]) * 8
	if n == 0 || n > len(it.b)-it.off {
		it.err = ErrNDPOption
		return NDPOption{}, false
	}
	o := NDPOption{Type: it.b[it.off], Data: it.b[it.off+2 : it.off+n : it.off+n]}
	it.off += n
	return o, true
}

// Err is the fault that stopped the walk, or nil.
func (it *NDPOptionIter) Err() error { return it.err }

// PutNDPOption writes an option of type typ with data into b, padded with zeros
// to whole 8-byte units, and returns its length.
func PutNDPOption(b []byte, typ uint8, data []byte) (int, error) {
	n := (2 + len(data) + 7) &^ 7
	if n > 255*8 {
		return 0, ErrNDPOption
	}
	if len(b) < n {
		return 0, ErrNoSpace
	}
	b[0] = typ
	b[1] = uint8(n / 8)
	k := copy(b[2:], data)
	clear(b[2+k : n])
	return n, nil
}

// PutNDPLinkAddr writes a source or target link-layer address option for
// Ethernet into b, which is at least NDPLinkAddrOptLen bytes.
func PutNDPLinkAddr(b []byte, typ uint8, m MAC) {
	_ = b[NDPLinkAddrOptLen-1]
	b[0] = typ
	b[1] = 1
	copy(b[2:8], m[:])
}
