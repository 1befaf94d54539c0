// Package rlnc is random linear network coding at the IP layer, after CODED IP
// (Huang et al., "CODED IP: on the Feasibility of IP-layer Network Coding"):
// an encoder cuts a session's packets into generations of K source blocks and
// sends random linear combinations of them over GF(2^8); recoders keep the
// innovative packets of each generation and send fresh combinations of what
// they hold on each output link; decoders solve each generation by Gauss–Jordan
// elimination and deliver the original IPv6 packets.
//
// The stage kinds are rlnc.encoder, rlnc.recoder and rlnc.decoder. The wire
// format is docs/rlnc-wire.md; the arithmetic is package gf.
package rlnc

import (
	"encoding/binary"
	"errors"
)

// NextHeader is the IPv6 Next Header value of a CODED IP packet: 253, for
// experimentation (RFC 3692, RFC 4727).
const NextHeader = 253

// Version is the wire format version this package speaks.
const Version = 1

// Field codes of the header's low nibble of octet 7.
const (
	FieldGF256 = 0 // GF(2^8) over x^8+x^4+x^3+x^2+1 (0x11D)
	FieldGF2   = 1 // reserved
	FieldGF16  = 2 // GF(2^4), reserved
	FieldGF65K = 3 // GF(2^16), reserved
)

// FlagSystematic marks a packet that is source block i itself: its coding
// vector is the unit vector e_i and its block is uncoded.
const FlagSystematic = 0x80

// FixedLen is the length of the header before the coding vector.
const FixedLen = 12

// MaxK is the largest generation size the format carries.
const MaxK = 255

// Overhead is what a coded packet adds to N besides the coding vector: the
// IPv6 header and the fixed CODED IP header. A coded packet fits an MTU when
// N ≤ MTU − Overhead − K.
const Overhead = 40 + FixedLen

// LenPrefix is the length prefix in front of each source block's bytes.
const LenPrefix = 2

// Header is a CODED IP header and the coded block after it (docs/rlnc-wire.md):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |  Session ID   |        Session Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Generation ID         | Gen. Size (K) |Version| Field |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Block Length (N)       |     Flags     | Blocks Used k′|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              Coding Vector (K octets, c_0 .. c_K−1)           |
//	~                                                               ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Coded Block (N octets)                    |
//	~                                                               ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Accessors trust the view's length; Parse checks it once.
type Header []byte

const (
	offNextHeader = 0
	offSessionID  = 1
	offSessionLen = 2
	offGenID      = 4
	offK          = 6
	offVerField   = 7
	offBlockLen   = 8
	offFlags      = 10
	offBlocksUsed = 11
)

// Errors of Parse. Each is one named drop reason of the stages.
var (
	ErrTruncated     = errors.New("rlnc: header truncated")
	ErrVersion       = errors.New("rlnc: unknown version")
	ErrField         = errors.New("rlnc: unknown or unsupported field")
	ErrZeroK         = errors.New("rlnc: generation size K is 0")
	ErrLength        = errors.New("rlnc: block length N does not match the packet length")
	ErrSmallN        = errors.New("rlnc: block length N below 2, the length prefix: no block can be decoded")
	ErrBlocksUsed    = errors.New("rlnc: blocks used k′ exceeds K, or a coefficient beyond k′ is set")
	ErrZeroVector    = errors.New("rlnc: all-zero coding vector")
	ErrNotSystematic = errors.New("rlnc: systematic packet whose vector is not a unit vector within k′")
	ErrShortBlock    = errors.New("rlnc: block shorter than its length prefix")
)

// Parse checks b, the bytes after the IPv6 header chain, as one CODED IP
// header with its block, and returns the view. b must be exactly the header,
// vector and N octets: anything else is ErrLength.
func Parse(b []byte) (Header, error) {
	if len(b) < FixedLen {
		return nil, ErrTruncated
	}
	h := Header(b)
	if h.Version() != Version {
		return nil, ErrVersion
	}
	if h.Field() != FieldGF256 {
		return nil, ErrField
	}
	k := h.K()
	if k == 0 {
		return nil, ErrZeroK
	}
	if len(b) < FixedLen+k {
		return nil, ErrTruncated
	}
	if h.BlockLen() < LenPrefix {
		// A source block starts with its length: a decoder could never
		// deliver one, and a recoder must not pass it on.
		return nil, ErrSmallN
	}
	if len(b) != FixedLen+k+h.BlockLen() {
		return nil, ErrLength
	}
	kk := h.BlocksUsed()
	if kk > k {
		return nil, ErrBlocksUsed
	}
	v := h.Vector()
	nz := -1
	for i, c := range v {
		if c != 0 {
			if i >= kk {
				return nil, ErrBlocksUsed
			}
			if nz >= 0 && h.Systematic() {
				return nil, ErrNotSystematic
			}
			nz = i
		}
	}
	if nz < 0 {
		return nil, ErrZeroVector
	}
	if h.Systematic() && v[nz] != 1 {
		return nil, ErrNotSystematic
	}
	return h, nil
}

// NextHeader is the upper-layer protocol of the session's packets.
func (h Header) NextHeader() uint8 { return h[offNextHeader] }

// SessionID is the session's id, unique per (source, destination).
func (h Header) SessionID() uint8 { return h[offSessionID] }

// SessionLength is the number of generations in the session; 0 = open-ended.
func (h Header) SessionLength() uint16 { return binary.BigEndian.Uint16(h[offSessionLen:]) }

// GenerationID is the generation, in RFC 1982 serial arithmetic.
func (h Header) GenerationID() uint16 { return binary.BigEndian.Uint16(h[offGenID:]) }

// K is the generation size: source blocks per generation and coding vector length.
func (h Header) K() int { return int(h[offK]) }

// Version is the format version (high nibble of octet 7).
func (h Header) Version() uint8 { return h[offVerField] >> 4 }

// Field is the coding field (low nibble of octet 7).
func (h Header) Field() uint8 { return h[offVerField] & 0x0F }

// BlockLen is N, the length of the coded block in octets.
func (h Header) BlockLen() int { return int(binary.BigEndian.Uint16(h[offBlockLen:])) }

// Flags is the flags octet.
func (h Header) Flags() uint8 { return h[offFlags] }

// Systematic reports whether the packet is an uncoded source block.
func (h Header) Systematic() bool { return h[offFlags]&FlagSystematic != 0 }

// BlocksUsed is k′, the blocks the generation codes over (K when the field is 0).
func (h Header) BlocksUsed() int {
	if h[offBlocksUsed] == 0 {
		return int(h[offK])
	}
	return int(h[offBlocksUsed])
}

// Vector is the coding vector, one coefficient per source block.
func (h Header) Vector() []byte { k := int(h[offK]); return h[FixedLen : FixedLen+k : FixedLen+k] }

// Block is the coded block.
func (h Header) Block() []byte { return h[FixedLen+int(h[offK]):] }

// Len is the length of header, vector and block.
func (h Header) Len() int { return FixedLen + h.K() + h.BlockLen() }

// SetGenerationID sets the generation id.
func (h Header) SetGenerationID(g uint16) { binary.BigEndian.PutUint16(h[offGenID:], g) }

// SetFlags sets the flags octet.
func (h Header) SetFlags(f uint8) { h[offFlags] = f }

// SetBlocksUsed sets k′ (0 = K).
func (h Header) SetBlocksUsed(k uint8) { h[offBlocksUsed] = k }

// Fields are the header's fields, for building and for tests.
type Fields struct {
	NextHeader    uint8
	SessionID     uint8
	SessionLength uint16
	GenerationID  uint16
	K             uint8
	Version       uint8
	Field         uint8
	BlockLen      uint16
	Flags         uint8
	BlocksUsed    uint8 // as on the wire: 0 = K
	Vector        []byte
}

// Fields reads every field. Vector aliases h.
func (h Header) Fields() Fields {
	return Fields{NextHeader: h.NextHeader(), SessionID: h.SessionID(), SessionLength: h.SessionLength(),
		GenerationID: h.GenerationID(), K: h[offK], Version: h.Version(), Field: h.Field(),
		BlockLen: uint16(h.BlockLen()), Flags: h.Flags(), BlocksUsed: h[offBlocksUsed], Vector: h.Vector()}
}

// Encode writes f's fixed fields and f.Vector (K octets, zero-padded when
// shorter) into h, which must hold at least FixedLen+K octets. The block is
// left as it is.
func (h Header) Encode(f *Fields) {
	h[offNextHeader] = f.NextHeader
	h[offSessionID] = f.SessionID
	binary.BigEndian.PutUint16(h[offSessionLen:], f.SessionLength)
	binary.BigEndian.PutUint16(h[offGenID:], f.GenerationID)
	h[offK] = f.K
	h[offVerField] = f.Version<<4 | f.Field&0x0F
	binary.BigEndian.PutUint16(h[offBlockLen:], f.BlockLen)
	h[offFlags] = f.Flags
	h[offBlocksUsed] = f.BlocksUsed
	v := h[FixedLen : FixedLen+int(f.K)]
	n := copy(v, f.Vector)
	clear(v[n:])
}

// SourceLen reads the length prefix of a decoded source block and checks it
// against the block: the upper-layer bytes are block[2 : 2+n].
func SourceLen(block []byte) (int, error) {
	if len(block) < LenPrefix {
		return 0, ErrShortBlock
	}
	n := int(binary.BigEndian.Uint16(block))
	if n > len(block)-LenPrefix {
		return 0, ErrShortBlock
	}
	return n, nil
}
