// Package genframe is the frame the benchmarks' generator configs make, for
// the C loops that send the same frames, and the checks that hold a capture
// of either side to it.
package genframe

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
)

// The generator's stream, as the benchmarks configure it.
const (
	Src, Dst       = "198.18.0.1", "198.18.1.1"
	SrcMAC, DstMAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
	SrcPort        = 10000
	DstPort        = 20000
)

// Stage is the TOML of the generator stage that makes this stream: frames of
// size bytes, count of them (0: no end), with extra (keys, one a line) added
// to its table.
func Stage(size, count int, extra string) string {
	return fmt.Sprintf(`[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = %q
dst = %q
src_mac = %q
dst_mac = %q
udp_src_port = %d
udp_dst_port = %d
sizes = [%d]
count = %d
%s`, Src, Dst, SrcMAC, DstMAC, SrcPort, DstPort, size, count, extra)
}

// Frame is a C loop's template: the frame with the generator's fields and the
// UDP checksum zero, where those go, and the template's UDP sum (header,
// payload and pseudo-header; not inverted).
type Frame struct {
	Data         []byte
	Fields, Csum int
	Sum          uint16
}

// IPv4 builds the generator's IPv4 frame of n bytes without the FCS (at least
// 58, for the fields) by hand: Ethernet, IPv4 (DF, TTL 64, id 0), UDP, the 16
// bytes of the generator's fields, and its "incr" payload pattern after them.
func IPv4(n int) Frame {
	d := make([]byte, n)
	copy(d[0:], []byte{2, 0, 0, 0, 0, 2})
	copy(d[6:], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(d[12:], 0x0800)
	ip := d[14:34]
	ip[0], ip[6], ip[8], ip[9] = 0x45, 0x40, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	src, dst := []byte{198, 18, 0, 1}, []byte{198, 18, 1, 1}
	copy(ip[12:], src)
	copy(ip[16:], dst)
	binary.BigEndian.PutUint16(ip[10:], ^packet.Checksum(ip, 0))
	u := d[34:]
	binary.BigEndian.PutUint16(u[0:], SrcPort)
	binary.BigEndian.PutUint16(u[2:], DstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	for i := 8; i < len(u); i++ {
		u[i] = byte(i - 8) // the pattern runs under the fields, which are then zeroed
	}
	clear(u[8:24])
	return Frame{Data: d, Fields: 42, Csum: 40, Sum: packet.Checksum(u, packet.PseudoHeaderChecksum(17, src, dst, uint32(len(u))))}
}

// Masked is d with the generator's fields and the UDP checksum zeroed.
func (f Frame) Masked(d []byte) []byte {
	m := bytes.Clone(d)
	if len(m) >= f.Fields+16 {
		clear(m[f.Fields : f.Fields+16])
		clear(m[f.Csum : f.Csum+2])
	}
	return m
}

// Check holds a capture of one side to f: every frame is f apart from the
// fields and the checksum; its flow is 0 and its sequence numbers rise (by one
// from 0 unless gaps, where a receiver may have lost some); its timestamps
// lie in [t0, t1] and never go back; its UDP checksum checks.
func (f Frame) Check(frames [][]byte, t0, t1 int64, gaps bool) error {
	want := f.Masked(f.Data)
	next, last := uint64(0), int64(0)
	for i, d := range frames {
		if !bytes.Equal(f.Masked(d), want) {
			return fmt.Errorf("frame %d differs beyond the fields and checksum:\n got  %x\n want %x", i, f.Masked(d), want)
		}
		v := binary.BigEndian.Uint64(d[f.Fields:])
		flow, seq := v>>48, v&(1<<48-1)
		if flow != 0 || seq < next || (!gaps && seq != next) {
			return fmt.Errorf("frame %d: flow %d sequence %d, want flow 0 sequence %d", i, flow, seq, next)
		}
		next = seq + 1
		ts := int64(binary.BigEndian.Uint64(d[f.Fields+8:]))
		if ts < t0 || ts > t1 || ts < last {
			return fmt.Errorf("frame %d: timestamp %d outside [%d, %d] or before the last (%d)", i, ts, t0, t1, last)
		}
		last = ts
		if !UDPChecksumOK(d) {
			return fmt.Errorf("frame %d: UDP checksum %#04x does not check", i, binary.BigEndian.Uint16(d[f.Csum:]))
		}
	}
	return nil
}

// UDPChecksumOK checks an IPv4 UDP frame's checksum the long way: the sum of
// the pseudo-header and the whole datagram, checksum included, is all ones.
func UDPChecksumOK(d []byte) bool {
	ip := d[14:]
	u := ip[20:]
	var s uint32
	for i := 12; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	s += 17 + uint32(len(u))
	for i := 0; i+1 < len(u); i += 2 {
		s += uint32(binary.BigEndian.Uint16(u[i:]))
	}
	if len(u)%2 == 1 {
		s += uint32(u[len(u)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return binary.BigEndian.Uint16(u[6:]) != 0 && s == 0xffff
}
