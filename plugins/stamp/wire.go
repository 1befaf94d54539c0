// Package stamp is linerate's STAMP (RFC 8762, RFC 8972, RFC 9503): a
// Session-Sender (stamp.sender), a Session-Reflector, stateless or stateful
// (stamp.reflector), and the Collector that closes the loop on the sender's
// side (stamp.collector), over IPv6 (with an SRH for SRv6 paths) and IPv4,
// unauthenticated or authenticated, with the TLVs of RFC 8972 and RFC 9503.
//
// The wire formats are header views in the gVisor style: SenderPacket,
// SenderPacketAuth, ReflectorPacket and ReflectorPacketAuth are byte slices
// with accessors named after the fields of the RFC figures, validated once by
// their length; TLV, TLVIter and the Encode/Parse helpers handle the
// extensions.
package stamp

import (
	"encoding/binary"
	"errors"
)

// Sizes and the well-known port.
const (
	// BaseLen is the base test packet in unauthenticated mode (RFC 8762 §4.2.1,
	// §4.3.1): 44 octets for both roles, so that a reflected packet is as large
	// as the one it answers.
	BaseLen = 44
	// BaseAuthLen is the base test packet in authenticated mode (§4.2.2, §4.3.2).
	BaseAuthLen = 112
	// HMACLen is HMAC-SHA-256 truncated to 128 bits (RFC 8762 §4.4).
	HMACLen = 16
	// HMACCovered is what the base packet's HMAC covers in authenticated mode:
	// "the first six blocks (96 octets)" (RFC 8762 §4.4), every field before it.
	HMACCovered = 96
	// DefaultPort is the STAMP UDP port (RFC 8762 §4.1).
	DefaultPort = 862
)

// Errors of the views and codecs.
var (
	ErrShort       = errors.New("stamp: shorter than the base test packet")
	ErrTLVOverrun  = errors.New("stamp: TLV runs past the packet")
	ErrTLVTooLong  = errors.New("stamp: TLV value longer than 65535 octets")
	ErrBadTLV      = errors.New("stamp: malformed TLV value")
	ErrNoSpace     = errors.New("stamp: buffer too small")
	ErrMultiplier  = errors.New("stamp: Error Estimate multiplier is zero")
	ErrHMACNotLast = errors.New("stamp: HMAC TLV is not the last TLV")
)

// layout holds a base format's field offsets, so the stages pick a format per
// session once and then write fields without branching on the mode. Offsets of
// fields a format lacks are -1.
type layout struct {
	base       int
	seq, ts    int
	errEst     int
	ssid       int
	rxTS       int
	sSeq, sTS  int
	sErr, sTTL int
	hmac       int
}

// The four base formats.
var (
	senderLayout        = layout{base: BaseLen, seq: 0, ts: 4, errEst: 12, ssid: 14, rxTS: -1, sSeq: -1, sTS: -1, sErr: -1, sTTL: -1, hmac: -1}
	senderAuthLayout    = layout{base: BaseAuthLen, seq: 0, ts: 16, errEst: 24, ssid: 26, rxTS: -1, sSeq: -1, sTS: -1, sErr: -1, sTTL: -1, hmac: 96}
	reflectorLayout     = layout{base: BaseLen, seq: 0, ts: 4, errEst: 12, ssid: 14, rxTS: 16, sSeq: 24, sTS: 28, sErr: 36, sTTL: 40, hmac: -1}
	reflectorAuthLayout = layout{base: BaseAuthLen, seq: 0, ts: 16, errEst: 24, ssid: 26, rxTS: 32, sSeq: 48, sTS: 64, sErr: 72, sTTL: 80, hmac: 96}
)

// reflected reports whether a base packet of the mode auth (at least that
// mode's base length) has a Session-Reflector's layout: its Receive Timestamp
// holds a time, where a Session-Sender's packet has MBZ octets (RFC 8762
// §4.2.1, §4.3.1; a TWAMP-Test reply has the same layout, RFC 5357 §4.2.1).
func reflected(pay []byte, auth bool) bool {
	_, r := layouts(auth)
	return binary.BigEndian.Uint64(pay[r.rxTS:]) != 0
}

func layouts(auth bool) (sender, reflector *layout) {
	if auth {
		return &senderAuthLayout, &reflectorAuthLayout
	}
	return &senderLayout, &reflectorLayout
}

// ErrorEstimate is the Error Estimate field (RFC 4656 §4.1.2, with Z from
// RFC 8186 §2.3, as RFC 8762 §4.2.1 uses it):
//
//	 0                   1
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|S|Z|   Scale   |   Multiplier  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// S: the clock is synchronised to UTC from an external source. Z: 0 for the
// NTP timestamp format, 1 for truncated PTPv2. The estimated error is
// Multiplier × 2^(Scale−32) seconds; Multiplier is never zero.
type ErrorEstimate uint16

// Error Estimate bits.
const (
	ErrEstS = 0x8000
	ErrEstZ = 0x4000
)

// MakeErrorEstimate packs the fields.
func MakeErrorEstimate(sync, ptp bool, scale, multiplier uint8) ErrorEstimate {
	e := ErrorEstimate(scale&0x3f)<<8 | ErrorEstimate(multiplier)
	if sync {
		e |= ErrEstS
	}
	if ptp {
		e |= ErrEstZ
	}
	return e
}

// Synchronized is the S bit.
func (e ErrorEstimate) Synchronized() bool { return e&ErrEstS != 0 }

// PTP is the Z bit: the timestamps next to this field are truncated PTPv2.
func (e ErrorEstimate) PTP() bool { return e&ErrEstZ != 0 }

// Scale is the 6-bit exponent.
func (e ErrorEstimate) Scale() uint8 { return uint8(e>>8) & 0x3f }

// Multiplier is the 8-bit mantissa.
func (e ErrorEstimate) Multiplier() uint8 { return uint8(e) }

// Nanoseconds is the estimated error.
func (e ErrorEstimate) Nanoseconds() float64 {
	return float64(e.Multiplier()) * float64(uint64(1)<<e.Scale()) / 4294967296.0 * 1e9
}

// Validate reports a zero multiplier (RFC 4656 §4.1.2: MUST NOT be zero).
func (e ErrorEstimate) Validate() error {
	if e.Multiplier() == 0 {
		return ErrMultiplier
	}
	return nil
}

// ErrorEstimateFor encodes an error of errNs nanoseconds as the smallest Scale
// whose Multiplier fits, rounding the error up so that it is never understated.
func ErrorEstimateFor(sync, ptp bool, errNs int64) ErrorEstimate {
	if errNs <= 0 {
		// The smallest expressible error: 2^-32 s, about 0.23 ns.
		return MakeErrorEstimate(sync, ptp, 0, 1)
	}
	// err in units of 2^-32 s, rounded up.
	u := (uint64(errNs)<<32 + 999_999_999) / 1e9
	if errNs >= 1<<31 { // avoid overflowing the shift above: about 2 s and more
		u = uint64(float64(errNs)/1e9*4294967296.0) + 1
	}
	var scale uint8
	for u > 255 && scale < 63 {
		u = (u + 1) >> 1
		scale++
	}
	if u > 255 {
		u = 255
	}
	if u == 0 {
		u = 1
	}
	return MakeErrorEstimate(sync, ptp, scale, uint8(u))
}

// SenderPacket is the Session-Sender test packet in unauthenticated mode,
// extended with the SSID (RFC 8762 §4.2.1, RFC 8972 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Sequence Number                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Timestamp                            |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Error Estimate        |             SSID              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         MBZ (28 octets)                       |
//	~                                                               ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                            TLVs                               ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// It is the UDP payload; check len ≥ BaseLen once, then read.
type SenderPacket []byte

func (b SenderPacket) Seq() uint32       { return binary.BigEndian.Uint32(b[0:]) }
func (b SenderPacket) Timestamp() uint64 { return binary.BigEndian.Uint64(b[4:]) }
func (b SenderPacket) ErrorEstimate() ErrorEstimate {
	return ErrorEstimate(binary.BigEndian.Uint16(b[12:]))
}
func (b SenderPacket) SSID() uint16          { return binary.BigEndian.Uint16(b[14:]) }
func (b SenderPacket) TLVs() []byte          { return b[BaseLen:] }
func (b SenderPacket) SetSeq(v uint32)       { binary.BigEndian.PutUint32(b[0:], v) }
func (b SenderPacket) SetTimestamp(v uint64) { binary.BigEndian.PutUint64(b[4:], v) }
func (b SenderPacket) SetErrorEstimate(e ErrorEstimate) {
	binary.BigEndian.PutUint16(b[12:], uint16(e))
}
func (b SenderPacket) SetSSID(v uint16) { binary.BigEndian.PutUint16(b[14:], v) }

// SenderPacketAuth is the Session-Sender test packet in authenticated mode
// (RFC 8762 §4.2.2, SSID from RFC 8972 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Sequence Number                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      MBZ (12 octets)                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Timestamp                              |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Error Estimate         |             SSID              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      MBZ (68 octets)                          |
//	~                                                               ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       HMAC (16 octets)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                            TLVs                               ~
//
// The HMAC covers octets 0–95. Check len ≥ BaseAuthLen once, then read.
type SenderPacketAuth []byte

func (b SenderPacketAuth) Seq() uint32       { return binary.BigEndian.Uint32(b[0:]) }
func (b SenderPacketAuth) Timestamp() uint64 { return binary.BigEndian.Uint64(b[16:]) }
func (b SenderPacketAuth) ErrorEstimate() ErrorEstimate {
	return ErrorEstimate(binary.BigEndian.Uint16(b[24:]))
}
func (b SenderPacketAuth) SSID() uint16    { return binary.BigEndian.Uint16(b[26:]) }
func (b SenderPacketAuth) HMAC() []byte    { return b[96:112] }
func (b SenderPacketAuth) Covered() []byte { return b[:HMACCovered] }
func (b SenderPacketAuth) TLVs() []byte    { return b[BaseAuthLen:] }

// ReflectorPacket is the Session-Reflector test packet in unauthenticated
// mode (RFC 8762 §4.3.1, SSID from RFC 8972 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Sequence Number                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Timestamp                            |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Error Estimate        |           SSID                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Receive Timestamp                    |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Session-Sender Sequence Number                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Session-Sender Timestamp                     |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Session-Sender Error Estimate  |           MBZ                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Ses-Sender TTL |                   MBZ                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                            TLVs                               ~
//
// Check len ≥ BaseLen once, then read.
type ReflectorPacket []byte

func (b ReflectorPacket) Seq() uint32       { return binary.BigEndian.Uint32(b[0:]) }
func (b ReflectorPacket) Timestamp() uint64 { return binary.BigEndian.Uint64(b[4:]) }
func (b ReflectorPacket) ErrorEstimate() ErrorEstimate {
	return ErrorEstimate(binary.BigEndian.Uint16(b[12:]))
}
func (b ReflectorPacket) SSID() uint16             { return binary.BigEndian.Uint16(b[14:]) }
func (b ReflectorPacket) ReceiveTimestamp() uint64 { return binary.BigEndian.Uint64(b[16:]) }
func (b ReflectorPacket) SenderSeq() uint32        { return binary.BigEndian.Uint32(b[24:]) }
func (b ReflectorPacket) SenderTimestamp() uint64  { return binary.BigEndian.Uint64(b[28:]) }
func (b ReflectorPacket) SenderErrorEstimate() ErrorEstimate {
	return ErrorEstimate(binary.BigEndian.Uint16(b[36:]))
}
func (b ReflectorPacket) SenderTTL() uint8 { return b[40] }
func (b ReflectorPacket) TLVs() []byte     { return b[BaseLen:] }

// ReflectorPacketAuth is the Session-Reflector test packet in authenticated
// mode (RFC 8762 §4.3.2, SSID from RFC 8972 §3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Sequence Number                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        MBZ (12 octets)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          Timestamp                            |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Error Estimate         |           SSID                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        MBZ (4 octets)                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Receive Timestamp                      |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        MBZ (8 octets)                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Session-Sender Sequence Number                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        MBZ (12 octets)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Session-Sender Timestamp                      |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Session-Sender Error Estimate |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                        MBZ (6 octets)                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Ses-Sender TTL |                                               |
//	+-+-+-+-+-+-+-+-+                                               +
//	|                        MBZ (15 octets)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        HMAC (16 octets)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                            TLVs                               ~
//
// The HMAC covers octets 0–95. Check len ≥ BaseAuthLen once, then read.
type ReflectorPacketAuth []byte

func (b ReflectorPacketAuth) Seq() uint32       { return binary.BigEndian.Uint32(b[0:]) }
func (b ReflectorPacketAuth) Timestamp() uint64 { return binary.BigEndian.Uint64(b[16:]) }
func (b ReflectorPacketAuth) ErrorEstimate() ErrorEstimate {
	return ErrorEstimate(binary.BigEndian.Uint16(b[24:]))
}
func (b ReflectorPacketAuth) SSID() uint16             { return binary.BigEndian.Uint16(b[26:]) }
func (b ReflectorPacketAuth) ReceiveTimestamp() uint64 { return binary.BigEndian.Uint64(b[32:]) }
func (b ReflectorPacketAuth) SenderSeq() uint32        { return binary.BigEndian.Uint32(b[48:]) }
func (b ReflectorPacketAuth) SenderTimestamp() uint64  { return binary.BigEndian.Uint64(b[64:]) }
func (b ReflectorPacketAuth) SenderErrorEstimate() ErrorEstimate {
	return ErrorEstimate(binary.BigEndian.Uint16(b[72:]))
}
func (b ReflectorPacketAuth) SenderTTL() uint8 { return b[80] }
func (b ReflectorPacketAuth) HMAC() []byte     { return b[96:112] }
func (b ReflectorPacketAuth) Covered() []byte  { return b[:HMACCovered] }
func (b ReflectorPacketAuth) TLVs() []byte     { return b[BaseAuthLen:] }

// SenderFields is a Session-Sender test packet decoded: what ParseSender
// returns and EncodeSender writes. MBZ fields are not kept: they are zero on
// transmit and ignored on receipt (RFC 8762 §4.2.1).
type SenderFields struct {
	Auth          bool
	Seq           uint32
	Timestamp     uint64
	ErrorEstimate ErrorEstimate
	SSID          uint16
	HMAC          [HMACLen]byte // authenticated mode
	TLVs          []TLVFields
}

// ReflectorFields is a Session-Reflector test packet decoded.
type ReflectorFields struct {
	Auth                bool
	Seq                 uint32
	Timestamp           uint64
	ErrorEstimate       ErrorEstimate
	SSID                uint16
	ReceiveTimestamp    uint64
	SenderSeq           uint32
	SenderTimestamp     uint64
	SenderErrorEstimate ErrorEstimate
	SenderTTL           uint8
	HMAC                [HMACLen]byte
	TLVs                []TLVFields
}

// ParseSender decodes a Session-Sender test packet (a UDP payload). It
// allocates the TLV list; TLV values alias b.
func ParseSender(b []byte, auth bool) (SenderFields, error) {
	l, _ := layouts(auth)
	f := SenderFields{Auth: auth}
	if len(b) < l.base {
		return f, ErrShort
	}
	f.Seq = binary.BigEndian.Uint32(b[l.seq:])
	f.Timestamp = binary.BigEndian.Uint64(b[l.ts:])
	f.ErrorEstimate = ErrorEstimate(binary.BigEndian.Uint16(b[l.errEst:]))
	f.SSID = binary.BigEndian.Uint16(b[l.ssid:])
	if auth {
		copy(f.HMAC[:], b[l.hmac:l.hmac+HMACLen])
	}
	tlvs, err := ParseTLVs(b[l.base:])
	f.TLVs = tlvs
	return f, err
}

// ParseReflector decodes a Session-Reflector test packet.
func ParseReflector(b []byte, auth bool) (ReflectorFields, error) {
	_, l := layouts(auth)
	f := ReflectorFields{Auth: auth}
	if len(b) < l.base {
		return f, ErrShort
	}
	f.Seq = binary.BigEndian.Uint32(b[l.seq:])
	f.Timestamp = binary.BigEndian.Uint64(b[l.ts:])
	f.ErrorEstimate = ErrorEstimate(binary.BigEndian.Uint16(b[l.errEst:]))
	f.SSID = binary.BigEndian.Uint16(b[l.ssid:])
	f.ReceiveTimestamp = binary.BigEndian.Uint64(b[l.rxTS:])
	f.SenderSeq = binary.BigEndian.Uint32(b[l.sSeq:])
	f.SenderTimestamp = binary.BigEndian.Uint64(b[l.sTS:])
	f.SenderErrorEstimate = ErrorEstimate(binary.BigEndian.Uint16(b[l.sErr:]))
	f.SenderTTL = b[l.sTTL]
	if auth {
		copy(f.HMAC[:], b[l.hmac:l.hmac+HMACLen])
	}
	tlvs, err := ParseTLVs(b[l.base:])
	f.TLVs = tlvs
	return f, err
}

// Len is the length EncodeSender writes.
func (f *SenderFields) Len() int {
	l, _ := layouts(f.Auth)
	return l.base + TLVsLen(f.TLVs)
}

// Len is the length EncodeReflector writes.
func (f *ReflectorFields) Len() int {
	_, l := layouts(f.Auth)
	return l.base + TLVsLen(f.TLVs)
}

// EncodeSender writes f into b, MBZ fields zeroed, and returns the length. The
// HMAC field is written as given: Key.SignSender computes it.
func EncodeSender(b []byte, f *SenderFields) (int, error) {
	l, _ := layouts(f.Auth)
	n := f.Len()
	if len(b) < n {
		return 0, ErrNoSpace
	}
	clear(b[:l.base])
	binary.BigEndian.PutUint32(b[l.seq:], f.Seq)
	binary.BigEndian.PutUint64(b[l.ts:], f.Timestamp)
	binary.BigEndian.PutUint16(b[l.errEst:], uint16(f.ErrorEstimate))
	binary.BigEndian.PutUint16(b[l.ssid:], f.SSID)
	if f.Auth {
		copy(b[l.hmac:], f.HMAC[:])
	}
	if _, err := PutTLVs(b[l.base:n], f.TLVs); err != nil {
		return 0, err
	}
	return n, nil
}

// EncodeReflector writes f into b, MBZ fields zeroed, and returns the length.
func EncodeReflector(b []byte, f *ReflectorFields) (int, error) {
	_, l := layouts(f.Auth)
	n := f.Len()
	if len(b) < n {
		return 0, ErrNoSpace
	}
	clear(b[:l.base])
	binary.BigEndian.PutUint32(b[l.seq:], f.Seq)
	binary.BigEndian.PutUint64(b[l.ts:], f.Timestamp)
	binary.BigEndian.PutUint16(b[l.errEst:], uint16(f.ErrorEstimate))
	binary.BigEndian.PutUint16(b[l.ssid:], f.SSID)
	binary.BigEndian.PutUint64(b[l.rxTS:], f.ReceiveTimestamp)
	binary.BigEndian.PutUint32(b[l.sSeq:], f.SenderSeq)
	binary.BigEndian.PutUint64(b[l.sTS:], f.SenderTimestamp)
	binary.BigEndian.PutUint16(b[l.sErr:], uint16(f.SenderErrorEstimate))
	b[l.sTTL] = f.SenderTTL
	if f.Auth {
		copy(b[l.hmac:], f.HMAC[:])
	}
	if _, err := PutTLVs(b[l.base:n], f.TLVs); err != nil {
		return 0, err
	}
	return n, nil
}
