package stamp

import (
	"encoding/binary"
	"net/netip"
)

// TLV is one STAMP TLV, header and value (RFC 8972 §4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|STAMP TLV Flags|     Type      |           Length              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	~                            Value                              ~
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Flags: U (0x80, unrecognized), M (0x40, malformed), I (0x20, integrity
// check failed); the others are reserved. Length counts the value only.
// Sub-TLVs (Location, Return Path) have the same header. A TLV from TLVIter
// holds its whole value.
type TLV []byte

// TLVHeaderLen is the Flags, Type and Length of a TLV or sub-TLV.
const TLVHeaderLen = 4

// STAMP TLV Flags (RFC 8972 §4, the "STAMP TLV Flags" registry).
const (
	FlagU uint8 = 0x80
	FlagM uint8 = 0x40
	FlagI uint8 = 0x20
)

// STAMP TLV Types, from IANA's "STAMP TLV Types" registry (RFC 8972 §5.1,
// RFC 9503 §6). Implementations in the wild have used other numbers; these
// are the registered ones.
const (
	TLVExtraPadding           uint8 = 1
	TLVLocation               uint8 = 2
	TLVTimestampInfo          uint8 = 3
	TLVClassOfService         uint8 = 4
	TLVDirectMeasurement      uint8 = 5
	TLVAccessReport           uint8 = 6
	TLVFollowUpTelemetry      uint8 = 7
	TLVHMAC                   uint8 = 8
	TLVDestinationNodeAddress uint8 = 9
	TLVReturnPath             uint8 = 10
)

// Sub-TLV types of the Location TLV ("STAMP Sub-TLV Types", RFC 8972 §5.3).
const (
	SubSourceMAC      uint8 = 1
	SubSourceEUI48    uint8 = 2
	SubSourceEUI64    uint8 = 3
	SubDestinationIP  uint8 = 4
	SubDestinationIP4 uint8 = 5
	SubDestinationIP6 uint8 = 6
	SubSourceIP       uint8 = 7
	SubSourceIP4      uint8 = 8
	SubSourceIP6      uint8 = 9
)

// Sub-TLV types of the Return Path TLV (RFC 9503 §4.1, "Return Path Sub-TLV
// Types").
const (
	SubReturnControlCode uint8 = 1
	SubReturnAddress     uint8 = 2
	SubReturnSRMPLS      uint8 = 3
	SubReturnSRv6        uint8 = 4
)

// Return Path Control Code flags (RFC 9503 §4.1.1): bit 0 set asks for the
// reply on the link the test packet came in on; clear, for no reply.
const ControlCodeReplySameLink uint32 = 0x1

// STAMP Synchronization Sources and Timestamping Methods (RFC 8972 §5.4, §5.5).
const (
	SyncNTP       uint8 = 1
	SyncPTP       uint8 = 2
	SyncSSUBITS   uint8 = 3
	SyncGNSS      uint8 = 4
	SyncLocalFree uint8 = 5

	MethodHWAssist     uint8 = 1
	MethodSWLocal      uint8 = 2
	MethodControlPlane uint8 = 3
)

// Fixed value lengths of the TLVs that have one.
const (
	TimestampInfoLen     = 4
	ClassOfServiceLen    = 4
	DirectMeasurementLen = 12
	AccessReportLen      = 4
	FollowUpTelemetryLen = 16
	HMACTLVLen           = HMACLen
	LocationMinLen       = 4 // the two ports; sub-TLVs follow
)

func (t TLV) Flags() uint8        { return t[0] }
func (t TLV) Type() uint8         { return t[1] }
func (t TLV) Len() int            { return int(binary.BigEndian.Uint16(t[2:])) }
func (t TLV) Value() []byte       { return t[TLVHeaderLen : TLVHeaderLen+t.Len()] }
func (t TLV) SetFlags(f uint8)    { t[0] = f }
func (t TLV) Size() int           { return TLVHeaderLen + t.Len() }
func (t TLV) Has(flag uint8) bool { return t[0]&flag != 0 }

// TLVIter walks a TLV area (what follows the base packet, or a TLV's value
// for sub-TLVs). A TLV whose Length runs past the area stops the walk with
// ErrTLVOverrun; Off then gives its offset, so a reflector can flag it.
type TLVIter struct {
	b    []byte
	off  int
	last int
	err  error
}

// NewTLVIter starts a walk over b.
func NewTLVIter(b []byte) TLVIter { return TLVIter{b: b} }

// Next returns the next TLV.
func (it *TLVIter) Next() (TLV, bool) {
	if it.err != nil || it.off >= len(it.b) {
		return nil, false
	}
	rest := it.b[it.off:]
	it.last = it.off
	if len(rest) < TLVHeaderLen {
		it.err = ErrTLVOverrun
		return nil, false
	}
	n := TLVHeaderLen + int(binary.BigEndian.Uint16(rest[2:]))
	if n > len(rest) {
		it.err = ErrTLVOverrun
		return nil, false
	}
	it.off += n
	return TLV(rest[:n:n]), true
}

// Off is the offset of the TLV Next last returned, or of the one that stopped
// the walk.
func (it *TLVIter) Off() int { return it.last }

// Err is the fault that stopped the walk, or nil.
func (it *TLVIter) Err() error { return it.err }

// TLVFields is a TLV decoded: what ParseTLVs returns and PutTLVs writes.
type TLVFields struct {
	Flags uint8
	Type  uint8
	Value []byte
}

// Len is the TLV's length on the wire.
func (t *TLVFields) Len() int { return TLVHeaderLen + len(t.Value) }

// ParseTLVs decodes a TLV area. Values alias b. On an overrun it returns the
// TLVs before it and ErrTLVOverrun.
func ParseTLVs(b []byte) ([]TLVFields, error) {
	var out []TLVFields
	it := NewTLVIter(b)
	for t, ok := it.Next(); ok; t, ok = it.Next() {
		out = append(out, TLVFields{Flags: t.Flags(), Type: t.Type(), Value: t.Value()})
	}
	return out, it.Err()
}

// TLVsLen is the length PutTLVs writes.
func TLVsLen(ts []TLVFields) int {
	n := 0
	for i := range ts {
		n += ts[i].Len()
	}
	return n
}

// PutTLVs writes ts into b and returns the length written.
func PutTLVs(b []byte, ts []TLVFields) (int, error) {
	off := 0
	for i := range ts {
		t := &ts[i]
		if len(t.Value) > 0xffff {
			return 0, ErrTLVTooLong
		}
		if len(b)-off < t.Len() {
			return 0, ErrNoSpace
		}
		b[off] = t.Flags
		b[off+1] = t.Type
		binary.BigEndian.PutUint16(b[off+2:], uint16(len(t.Value)))
		off += TLVHeaderLen + copy(b[off+TLVHeaderLen:], t.Value)
	}
	return off, nil
}

// AppendTLV appends one TLV to b.
func AppendTLV(b []byte, flags, typ uint8, value []byte) []byte {
	b = append(b, flags, typ, byte(len(value)>>8), byte(len(value)))
	return append(b, value...)
}

// ClassOfService is the Class of Service TLV's value (RFC 8972 §4.4):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   DSCP1   |   DSCP2   |ECN| RP|          Reserved             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// DSCP1 is what the sender asks the reflected packet to carry; DSCP2 and ECN
// are what the reflector received; RP is set to 1 when the reflector's policy
// refused DSCP1.
type ClassOfService struct {
	DSCP1, DSCP2, ECN, RP uint8
}

// Encode writes the value.
func (c ClassOfService) Encode() [ClassOfServiceLen]byte {
	v := uint32(c.DSCP1&0x3f)<<26 | uint32(c.DSCP2&0x3f)<<20 | uint32(c.ECN&3)<<18 | uint32(c.RP&3)<<16
	var b [ClassOfServiceLen]byte
	binary.BigEndian.PutUint32(b[:], v)
	return b
}

// DecodeClassOfService reads a Class of Service value.
func DecodeClassOfService(v []byte) (ClassOfService, error) {
	if len(v) != ClassOfServiceLen {
		return ClassOfService{}, ErrBadTLV
	}
	x := binary.BigEndian.Uint32(v)
	return ClassOfService{DSCP1: uint8(x >> 26 & 0x3f), DSCP2: uint8(x >> 20 & 0x3f), ECN: uint8(x >> 18 & 3), RP: uint8(x >> 16 & 3)}, nil
}

// TimestampInfo is the Timestamp Information TLV's value (RFC 8972 §4.3): the
// synchronisation source and timestamping method of the reflector's ingress
// (T2) and egress (T3). A sender sends it zeroed.
type TimestampInfo struct {
	SyncSrcIn, TimestampIn, SyncSrcOut, TimestampOut uint8
}

// Encode writes the value.
func (t TimestampInfo) Encode() [TimestampInfoLen]byte {
	return [TimestampInfoLen]byte{t.SyncSrcIn, t.TimestampIn, t.SyncSrcOut, t.TimestampOut}
}

// DecodeTimestampInfo reads a Timestamp Information value.
func DecodeTimestampInfo(v []byte) (TimestampInfo, error) {
	if len(v) != TimestampInfoLen {
		return TimestampInfo{}, ErrBadTLV
	}
	return TimestampInfo{v[0], v[1], v[2], v[3]}, nil
}

// DirectMeasurement is the Direct Measurement TLV's value (RFC 8972 §4.5):
// the sender's transmit count, and the reflector's receive and transmit counts
// of the session's in-profile packets.
type DirectMeasurement struct {
	SenderTx, ReflectorRx, ReflectorTx uint32
}

// Encode writes the value.
func (d DirectMeasurement) Encode() [DirectMeasurementLen]byte {
	var b [DirectMeasurementLen]byte
	binary.BigEndian.PutUint32(b[0:], d.SenderTx)
	binary.BigEndian.PutUint32(b[4:], d.ReflectorRx)
	binary.BigEndian.PutUint32(b[8:], d.ReflectorTx)
	return b
}

// DecodeDirectMeasurement reads a Direct Measurement value.
func DecodeDirectMeasurement(v []byte) (DirectMeasurement, error) {
	if len(v) != DirectMeasurementLen {
		return DirectMeasurement{}, ErrBadTLV
	}
	return DirectMeasurement{binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:]), binary.BigEndian.Uint32(v[8:])}, nil
}

// AccessReport is the Access Report TLV's value (RFC 8972 §4.6): Access ID (1
// 3GPP, 2 non-3GPP; 4 bits) and Return Code (1 network available, 2
// unavailable).
type AccessReport struct {
	ID, ReturnCode uint8
}

// Encode writes the value.
func (a AccessReport) Encode() [AccessReportLen]byte {
	return [AccessReportLen]byte{a.ID << 4, a.ReturnCode}
}

// DecodeAccessReport reads an Access Report value.
func DecodeAccessReport(v []byte) (AccessReport, error) {
	if len(v) != AccessReportLen {
		return AccessReport{}, ErrBadTLV
	}
	return AccessReport{ID: v[0] >> 4, ReturnCode: v[1]}, nil
}

// FollowUpTelemetry is the Follow-Up Telemetry TLV's value (RFC 8972 §4.7):
// the reflector's sequence number and transmit timestamp of the previous
// packet it reflected in the session, and how that timestamp was taken.
type FollowUpTelemetry struct {
	Seq       uint32
	Timestamp uint64
	Method    uint8
}

// Encode writes the value.
func (f FollowUpTelemetry) Encode() [FollowUpTelemetryLen]byte {
	var b [FollowUpTelemetryLen]byte
	binary.BigEndian.PutUint32(b[0:], f.Seq)
	binary.BigEndian.PutUint64(b[4:], f.Timestamp)
	b[12] = f.Method
	return b
}

// DecodeFollowUpTelemetry reads a Follow-Up Telemetry value.
func DecodeFollowUpTelemetry(v []byte) (FollowUpTelemetry, error) {
	if len(v) != FollowUpTelemetryLen {
		return FollowUpTelemetry{}, ErrBadTLV
	}
	return FollowUpTelemetry{Seq: binary.BigEndian.Uint32(v), Timestamp: binary.BigEndian.Uint64(v[4:]), Method: v[12]}, nil
}

// Location is the Location TLV's value (RFC 8972 §4.2): the UDP ports the
// reflector received the test packet with, then sub-TLVs (same header as a
// TLV) that ask for and carry addresses.
type Location struct {
	DstPort, SrcPort uint16
	Sub              []TLVFields
}

// Encode appends the value to b.
func (l *Location) Encode(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, l.DstPort)
	b = binary.BigEndian.AppendUint16(b, l.SrcPort)
	for _, s := range l.Sub {
		b = AppendTLV(b, s.Flags, s.Type, s.Value)
	}
	return b
}

// DecodeLocation reads a Location value; sub-TLV values alias v.
func DecodeLocation(v []byte) (Location, error) {
	if len(v) < LocationMinLen {
		return Location{}, ErrBadTLV
	}
	l := Location{DstPort: binary.BigEndian.Uint16(v), SrcPort: binary.BigEndian.Uint16(v[2:])}
	subs, err := ParseTLVs(v[LocationMinLen:])
	l.Sub = subs
	if err != nil {
		return l, ErrBadTLV
	}
	return l, nil
}

// locationSubLen is the value length each Location sub-TLV type must have
// (RFC 8972 §4.2.1), or 0 for an unknown type.
func locationSubLen(t uint8) int {
	switch t {
	case SubSourceMAC, SubSourceEUI48, SubSourceEUI64:
		return 8
	case SubDestinationIP, SubDestinationIP4, SubDestinationIP6, SubSourceIP, SubSourceIP4, SubSourceIP6:
		return 16
	}
	return 0
}

// LocationRequest is the Location value a sender sends: zeroed ports and the
// sub-TLVs asking for the source MAC and both addresses, their values zeroed
// (RFC 8972 §4.2.2).
func LocationRequest() []byte {
	l := Location{Sub: []TLVFields{
		{Type: SubSourceMAC, Value: make([]byte, 8)},
		{Type: SubDestinationIP, Value: make([]byte, 16)},
		{Type: SubSourceIP, Value: make([]byte, 16)},
	}}
	return l.Encode(nil)
}

// ReturnPath is the Return Path TLV's value (RFC 9503 §4): sub-TLVs with a
// Control Code, a Return Address, or a segment list for the reflected packet.
type ReturnPath struct {
	Sub []TLVFields
}

// ReturnPathSRv6 is a Return Path value holding an SRv6 segment list, first
// segment to visit first (RFC 9503 §4.1.3.2).
func ReturnPathSRv6(segs []netip.Addr) []byte {
	v := make([]byte, 0, 16*len(segs))
	for _, s := range segs {
		a := s.As16()
		v = append(v, a[:]...)
	}
	return AppendTLV(nil, 0, SubReturnSRv6, v)
}

// ReturnPathControlCode is a Return Path value holding a Control Code.
func ReturnPathControlCode(cc uint32) []byte {
	return AppendTLV(nil, 0, SubReturnControlCode, binary.BigEndian.AppendUint32(nil, cc))
}

// ReturnPathAddress is a Return Path value holding a Return Address.
func ReturnPathAddress(a netip.Addr) []byte {
	if a.Is4() {
		b := a.As4()
		return AppendTLV(nil, 0, SubReturnAddress, b[:])
	}
	b := a.As16()
	return AppendTLV(nil, 0, SubReturnAddress, b[:])
}

// DecodeReturnPath reads a Return Path value.
func DecodeReturnPath(v []byte) (ReturnPath, error) {
	subs, err := ParseTLVs(v)
	if err != nil {
		return ReturnPath{Sub: subs}, ErrBadTLV
	}
	return ReturnPath{Sub: subs}, nil
}

// SRv6Segments returns the first SRv6 segment list of the Return Path, in
// travel order.
func (r *ReturnPath) SRv6Segments() ([]netip.Addr, bool) {
	for _, s := range r.Sub {
		if s.Type != SubReturnSRv6 {
			continue
		}
		if len(s.Value) == 0 || len(s.Value)%16 != 0 {
			return nil, false
		}
		out := make([]netip.Addr, 0, len(s.Value)/16)
		for i := 0; i < len(s.Value); i += 16 {
			out = append(out, netip.AddrFrom16([16]byte(s.Value[i:i+16])))
		}
		return out, true
	}
	return nil, false
}

// DestinationNodeAddress is the Destination Node Address TLV's value (RFC
// 9503 §3): the address the sender meant the test packet for.
func DestinationNodeAddress(a netip.Addr) []byte {
	if a.Is4() {
		b := a.As4()
		return b[:]
	}
	b := a.As16()
	return b[:]
}

// DecodeDestinationNodeAddress reads a Destination Node Address value.
func DecodeDestinationNodeAddress(v []byte) (netip.Addr, error) {
	switch len(v) {
	case 4:
		return netip.AddrFrom4([4]byte(v)), nil
	case 16:
		return netip.AddrFrom16([16]byte(v)), nil
	}
	return netip.Addr{}, ErrBadTLV
}

// TLVName is the registry's name of a TLV type, for logs and the CLI.
func TLVName(t uint8) string {
	switch t {
	case TLVExtraPadding:
		return "extra_padding"
	case TLVLocation:
		return "location"
	case TLVTimestampInfo:
		return "timestamp_info"
	case TLVClassOfService:
		return "class_of_service"
	case TLVDirectMeasurement:
		return "direct_measurement"
	case TLVAccessReport:
		return "access_report"
	case TLVFollowUpTelemetry:
		return "follow_up_telemetry"
	case TLVHMAC:
		return "hmac"
	case TLVDestinationNodeAddress:
		return "destination_node_address"
	case TLVReturnPath:
		return "return_path"
	}
	return "unknown"
}

// tlvFixedLen is the value length a TLV type must have (0: variable, -1:
// unknown type).
func tlvFixedLen(t uint8) int {
	switch t {
	case TLVTimestampInfo:
		return TimestampInfoLen
	case TLVClassOfService:
		return ClassOfServiceLen
	case TLVDirectMeasurement:
		return DirectMeasurementLen
	case TLVAccessReport:
		return AccessReportLen
	case TLVFollowUpTelemetry:
		return FollowUpTelemetryLen
	case TLVHMAC:
		return HMACTLVLen
	case TLVExtraPadding, TLVLocation, TLVDestinationNodeAddress, TLVReturnPath:
		return 0
	}
	return -1
}

// WellFormed reports whether t's length suits its type (RFC 8972 §4: the M
// flag's test). Unknown types are well formed: they get U, not M.
func (t TLV) WellFormed() bool {
	n := t.Len()
	switch want := tlvFixedLen(t.Type()); {
	case want > 0:
		return n == want
	case want < 0:
		return true
	}
	v := t.Value()
	switch t.Type() {
	case TLVLocation:
		if n < LocationMinLen {
			return false
		}
		it := NewTLVIter(v[LocationMinLen:])
		for s, ok := it.Next(); ok; s, ok = it.Next() {
			if l := locationSubLen(s.Type()); l != 0 && s.Len() != l {
				return false
			}
		}
		return it.Err() == nil
	case TLVDestinationNodeAddress:
		return n == 4 || n == 16
	case TLVReturnPath:
		it := NewTLVIter(v)
		count := 0
		for s, ok := it.Next(); ok; s, ok = it.Next() {
			count++
			switch s.Type() {
			case SubReturnControlCode:
				if s.Len() != 4 {
					return false
				}
			case SubReturnAddress:
				if s.Len() != 4 && s.Len() != 16 {
					return false
				}
			case SubReturnSRv6:
				if s.Len() == 0 || s.Len()%16 != 0 {
					return false
				}
			case SubReturnSRMPLS:
				if s.Len() == 0 || s.Len()%4 != 0 {
					return false
				}
			}
		}
		return it.Err() == nil && count > 0
	}
	return true
}
