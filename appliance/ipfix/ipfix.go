// Package ipfix exports records to IPFIX collectors (RFC 7011): message,
// template and data set encoding, and an Exporter that sends them over UDP
// or TCP, with templates sent before the data that uses them and, over UDP,
// sent again every template refresh interval (RFC 7011 section 8.4).
//
// Plugins describe their records as Templates of fixed-length fields
// (information elements: IANA's where one exists, the configured private
// enterprise number's otherwise) and hand the Exporter encoded records. The
// config's [ipfix] table (Config) names the collectors; see
// docs/operations.md.
package ipfix

import (
	"encoding/binary"
	"fmt"
)

// Version is IPFIX's version number in the message header.
const Version = 10

// Set IDs (RFC 7011 section 3.3.2).
const (
	TemplateSetID = 2
	// MinDataSetID is the first template ID; a data set's ID is its template's.
	MinDataSetID = 256
)

// Header sizes.
const (
	messageHeaderLen = 16
	setHeaderLen     = 4
)

// Field is an information element of a template, of a fixed length.
type Field struct {
	// ID is the element's number; Enterprise its private enterprise number,
	// 0 for an IANA element.
	ID         uint16
	Enterprise uint32
	Len        uint16
	// Name is the element's name, for the docs and the collector's config.
	Name string
	// Type is the abstract data type (RFC 7012): unsigned8 … unsigned64,
	// signed64, ipv6Address, dateTimeNanoseconds.
	Type string
}

// IANA information elements the plugins use (IANA's IPFIX registry).
var (
	SourceIPv6Address          = Field{ID: 27, Len: 16, Name: "sourceIPv6Address", Type: "ipv6Address"}
	DestinationIPv6Address     = Field{ID: 28, Len: 16, Name: "destinationIPv6Address", Type: "ipv6Address"}
	SourceIPv4Address          = Field{ID: 8, Len: 4, Name: "sourceIPv4Address", Type: "ipv4Address"}
	DestinationIPv4Address     = Field{ID: 12, Len: 4, Name: "destinationIPv4Address", Type: "ipv4Address"}
	IngressInterface           = Field{ID: 10, Len: 4, Name: "ingressInterface", Type: "unsigned32"}
	EgressInterface            = Field{ID: 14, Len: 4, Name: "egressInterface", Type: "unsigned32"}
	PacketTotalCount           = Field{ID: 86, Len: 8, Name: "packetTotalCount", Type: "unsigned64"}
	FlowStartNanoseconds       = Field{ID: 156, Len: 8, Name: "flowStartNanoseconds", Type: "dateTimeNanoseconds"}
	FlowEndNanoseconds         = Field{ID: 157, Len: 8, Name: "flowEndNanoseconds", Type: "dateTimeNanoseconds"}
	ObservationTimeNanoseconds = Field{ID: 325, Len: 8, Name: "observationTimeNanoseconds", Type: "dateTimeNanoseconds"}
)

// Template is a template record: an ID of at least MinDataSetID and its
// fields, in order. Its records are Size bytes.
type Template struct {
	ID     uint16
	Name   string
	Fields []Field
}

// Size is the length of one of the template's data records.
func (t *Template) Size() int {
	n := 0
	for _, f := range t.Fields {
		n += int(f.Len)
	}
	return n
}

// withEnterprise is t with every private field's enterprise number set to
// pen.
func (t *Template) withEnterprise(pen uint32) *Template {
	c := &Template{ID: t.ID, Name: t.Name, Fields: append([]Field(nil), t.Fields...)}
	for i := range c.Fields {
		if c.Fields[i].Enterprise != 0 {
			c.Fields[i].Enterprise = pen
		}
	}
	return c
}

// appendRecord appends t's template record (RFC 7011 section 3.4.1).
func (t *Template) appendRecord(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, t.ID)
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Fields)))
	for _, f := range t.Fields {
		if f.Enterprise != 0 {
			b = binary.BigEndian.AppendUint16(b, f.ID|0x8000)
			b = binary.BigEndian.AppendUint16(b, f.Len)
			b = binary.BigEndian.AppendUint32(b, f.Enterprise)
			continue
		}
		b = binary.BigEndian.AppendUint16(b, f.ID)
		b = binary.BigEndian.AppendUint16(b, f.Len)
	}
	return b
}

func (t *Template) check() error {
	if t.ID < MinDataSetID {
		return fmt.Errorf("ipfix: template %s: ID %d is below %d", t.Name, t.ID, MinDataSetID)
	}
	for _, f := range t.Fields {
		if f.ID&0x8000 != 0 || f.Len == 0 || f.Len == 0xFFFF {
			return fmt.Errorf("ipfix: template %s: field %s: ID %d or length %d", t.Name, f.Name, f.ID, f.Len)
		}
	}
	return nil
}

// Record writes a data record's fields, in its template's order, into a
// buffer of the template's Size.
type Record struct {
	b []byte
	o int
}

// NewRecord writes into b.
func NewRecord(b []byte) *Record { return &Record{b: b} }

func (r *Record) U8(v uint8) *Record { r.b[r.o] = v; r.o++; return r }
func (r *Record) U16(v uint16) *Record {
	binary.BigEndian.PutUint16(r.b[r.o:], v)
	r.o += 2
	return r
}
func (r *Record) U32(v uint32) *Record {
	binary.BigEndian.PutUint32(r.b[r.o:], v)
	r.o += 4
	return r
}
func (r *Record) U64(v uint64) *Record {
	binary.BigEndian.PutUint64(r.b[r.o:], v)
	r.o += 8
	return r
}
func (r *Record) I64(v int64) *Record { return r.U64(uint64(v)) }
func (r *Record) Bytes(v []byte) *Record {
	r.o += copy(r.b[r.o:], v)
	return r
}

// Nanos writes a dateTimeNanoseconds (RFC 7011 section 6.1.10): NTP
// seconds since 1900 and a binary fraction of a second, from Unix ns.
func (r *Record) Nanos(unixNs int64) *Record {
	const ntpEpoch = 2208988800 // 1900 to 1970, seconds
	sec := uint64(unixNs/1e9) + ntpEpoch
	frac := uint64(unixNs%1e9) << 32 / 1e9
	return r.U64(sec<<32 | frac)
}

// Len is how many bytes have been written.
func (r *Record) Len() int { return r.o }
