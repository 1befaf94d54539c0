package packet

import (
	"encoding/binary"
	"fmt"
)

// Ethernet is an Ethernet II header with up to two VLAN tags (IEEE 802.1Q, and
// 802.1ad QinQ, whose outer tag is 0x88A8 or, on older gear, 0x8100):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination MAC Address                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Destination MAC (cont.)      |       Source MAC Address      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Source MAC Address (cont.)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  TPID 0x88A8 / 0x8100 (opt.)  | PCP |D|    VLAN ID (opt.)     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  TPID 0x8100 (opt.)           | PCP |D|    VLAN ID (opt.)     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          EtherType            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Validate it once; the other accessors then read without checks.
type Ethernet []byte

// Ethernet header sizes and EtherTypes.
const (
	EthernetMinLen = 14 // untagged header
	VLANTagLen     = 4
	MaxVLANTags    = 2
	EthernetMaxLen = EthernetMinLen + MaxVLANTags*VLANTagLen

	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeVLAN = 0x8100 // IEEE 802.1Q C-tag
	EtherTypeIPv6 = 0x86DD
	EtherTypeQinQ = 0x88A8 // IEEE 802.1ad S-tag

	ethDst  = 0
	ethSrc  = 6
	ethType = 12
)

// MAC is an Ethernet address.
type MAC [6]byte

func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// VLANTag is one 802.1Q tag: its TPID and the fields of its Tag Control
// Information.
type VLANTag struct {
	TPID uint16
	PCP  uint8 // priority code point, 3 bits
	DEI  bool  // drop eligible
	VID  uint16
}

// TCI is the tag's Tag Control Information.
func (t VLANTag) TCI() uint16 {
	tci := uint16(t.PCP&7)<<13 | t.VID&0x0fff
	if t.DEI {
		tci |= 1 << 12
	}
	return tci
}

func tagFromTCI(tpid, tci uint16) VLANTag {
	return VLANTag{TPID: tpid, PCP: uint8(tci >> 13), DEI: tci&(1<<12) != 0, VID: tci & 0x0fff}
}

func isTPID(t uint16) bool { return t == EtherTypeVLAN || t == EtherTypeQinQ }

// Validate checks that b holds a whole header: its tags and the EtherType after
// them. A third tag is ErrTooManyVLANs.
func (b Ethernet) Validate() error {
	if len(b) < EthernetMinLen {
		return ErrTruncated
	}
	off := ethType
	for i := 0; isTPID(binary.BigEndian.Uint16(b[off:])); i++ {
		if i == MaxVLANTags {
			return ErrTooManyVLANs
		}
		off += VLANTagLen
		if len(b) < off+2 {
			return ErrTruncated
		}
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b Ethernet) IsValid() bool { return b.Validate() == nil }

// Dst is the destination address.
func (b Ethernet) Dst() MAC { return MAC(b[ethDst : ethDst+6]) }

// Src is the source address.
func (b Ethernet) Src() MAC { return MAC(b[ethSrc : ethSrc+6]) }

// SetDst sets the destination address.
func (b Ethernet) SetDst(m MAC) { copy(b[ethDst:ethDst+6], m[:]) }

// SetSrc sets the source address.
func (b Ethernet) SetSrc(m MAC) { copy(b[ethSrc:ethSrc+6], m[:]) }

// SwapMAC exchanges source and destination, as a reflector does.
func (b Ethernet) SwapMAC() {
	_ = b[11]
	var t [6]byte
	copy(t[:], b[0:6])
	copy(b[0:6], b[6:12])
	copy(b[6:12], t[:])
}

// NumTags is the number of VLAN tags, 0 to MaxVLANTags.
func (b Ethernet) NumTags() int {
	if !isTPID(binary.BigEndian.Uint16(b[ethType:])) {
		return 0
	}
	if !isTPID(binary.BigEndian.Uint16(b[ethType+VLANTagLen:])) {
		return 1
	}
	return 2
}

// HeaderLen is the header's length with its tags.
func (b Ethernet) HeaderLen() int { return EthernetMinLen + b.NumTags()*VLANTagLen }

// EtherType is the type after the tags (or the 802.3 length, when below 0x0600).
func (b Ethernet) EtherType() uint16 {
	return binary.BigEndian.Uint16(b[ethType+b.NumTags()*VLANTagLen:])
}

// SetEtherType sets the type after the tags.
func (b Ethernet) SetEtherType(t uint16) {
	binary.BigEndian.PutUint16(b[ethType+b.NumTags()*VLANTagLen:], t)
}

// Tag is VLAN tag i, 0 being the outer tag; i < NumTags.
func (b Ethernet) Tag(i int) VLANTag {
	off := ethType + i*VLANTagLen
	return tagFromTCI(binary.BigEndian.Uint16(b[off:]), binary.BigEndian.Uint16(b[off+2:]))
}

// SetTag rewrites VLAN tag i in place; i < NumTags.
func (b Ethernet) SetTag(i int, t VLANTag) {
	off := ethType + i*VLANTagLen
	binary.BigEndian.PutUint16(b[off:], t.TPID)
	binary.BigEndian.PutUint16(b[off+2:], t.TCI())
}

// EthernetFields are the fields of an Ethernet header, for Encode.
type EthernetFields struct {
	Dst, Src MAC
	NumTags  int // 0 to MaxVLANTags
	Tags     [MaxVLANTags]VLANTag
	Type     uint16
}

// HeaderLen is the length Encode writes.
func (f *EthernetFields) HeaderLen() int { return EthernetMinLen + f.NumTags*VLANTagLen }

// Fields returns the header's fields.
func (b Ethernet) Fields() EthernetFields {
	f := EthernetFields{Dst: b.Dst(), Src: b.Src(), NumTags: b.NumTags(), Type: b.EtherType()}
	for i := 0; i < f.NumTags; i++ {
		f.Tags[i] = b.Tag(i)
	}
	return f
}

// Encode writes f into b, which is at least f.HeaderLen() bytes. Tags with a
// zero TPID get 0x88A8 when outer of two, 0x8100 otherwise.
func (b Ethernet) Encode(f *EthernetFields) {
	_ = b[f.HeaderLen()-1]
	b.SetDst(f.Dst)
	b.SetSrc(f.Src)
	off := ethType
	for i := 0; i < f.NumTags; i++ {
		t := f.Tags[i]
		if t.TPID == 0 {
			t.TPID = EtherTypeVLAN
			if i == 0 && f.NumTags == 2 {
				t.TPID = EtherTypeQinQ
			}
		}
		binary.BigEndian.PutUint16(b[off:], t.TPID)
		binary.BigEndian.PutUint16(b[off+2:], t.TCI())
		off += VLANTagLen
	}
	binary.BigEndian.PutUint16(b[off:], f.Type)
}
