// Package memif speaks the shared-memory packet interface of VPP's libmemif
// and DPDK's net_memif PMD (memif protocol version 2.0): a unix SEQPACKET
// control socket, memory regions passed as file descriptors, and rings of
// descriptors in those regions. Both the memif port driver and the external
// stage (an out-of-process plugin) move packets through it.
//
// The client owns the memory: it makes the regions, lays out the rings and
// their buffers, and hands them to the server over the control socket. On a
// client-to-server (C2S) ring the client produces (it advances head) and the
// server consumes (it advances tail); on a server-to-client (S2C) ring the
// client gives empty buffers (head) and the server fills them (tail).
//
// Everything the peer writes into shared memory is read once into a local copy
// and checked before use: a descriptor naming memory outside the regions is a
// counted error, never an access. Rings are host-endian, as in libmemif.
package memif

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol constants, from libmemif's memif.h.
const (
	Cookie        = 0x3E31F20
	Version       = 0x0200 // major 2, minor 0
	MsgSize       = 128
	NameLen       = 32
	SecretLen     = 24
	DescSize      = 16
	RingHdrSize   = 128 // cookie, flags and head on one cache line, tail on the next
	MaxLog2Ring   = 14
	MaxRegions    = 256
	MaxRingsEach  = 256
	discStringLen = 96
)

// Ring kinds, as in memif_ring_type_t (S2M and M2S in older releases).
const (
	C2S = 0 // client to server
	S2C = 1 // server to client
)

// Ring and descriptor flags.
const (
	RingFlagMaskInt = 1 // the ring's receiver polls: no eventfd interrupt wanted
	DescFlagNext    = 1 // the packet goes on in the next descriptor
	addRingFlagC2S  = 1
	modeEthernet    = 0
)

// MsgType is a control message's type.
type MsgType uint16

// Control message types.
const (
	MsgNone MsgType = iota
	MsgAck
	MsgHello
	MsgInit
	MsgAddRegion
	MsgAddRing
	MsgConnect
	MsgConnected
	MsgDisconnect
)

var msgNames = [...]string{"none", "ack", "hello", "init", "add_region", "add_ring", "connect", "connected", "disconnect"}

func (t MsgType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("msg(%d)", uint16(t))
}

// Msg is a decoded control message: the fields of whichever message Type is.
type Msg struct {
	Type MsgType

	// hello
	Name                   string
	MinVersion, MaxVersion uint16
	MaxRegion              uint16
	MaxC2S, MaxS2C         uint16 // highest ring index the server takes
	MaxLog2Ring            uint8
	// init
	Version uint16
	ID      uint32
	Mode    uint8
	Secret  string
	// add_region
	Index uint16
	Size  uint64
	// add_ring (Index above)
	Flags       uint16
	Region      uint16
	Offset      uint32
	Log2Ring    uint8
	PrivHdrSize uint16
	// disconnect
	Code   uint32
	Reason string
}

var le = binary.LittleEndian

func putStr(b []byte, s string) {
	clear(b)
	copy(b[:len(b)-1], s) // always NUL-terminated, as strlcpy
}

// getStr reads a name field; its last byte is always its terminator
// (strlcpy), so it is left out.
func getStr(b []byte) string { return cstr(b[:len(b)-1]) }

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Encode writes m into a 128-byte message.
func (m *Msg) Encode(b *[MsgSize]byte) {
	clear(b[:])
	le.PutUint16(b[0:], uint16(m.Type))
	switch m.Type {
	case MsgHello:
		putStr(b[2:34], m.Name)
		le.PutUint16(b[34:], m.MinVersion)
		le.PutUint16(b[36:], m.MaxVersion)
		le.PutUint16(b[38:], m.MaxRegion)
		le.PutUint16(b[40:], m.MaxS2C) // max_m2s_ring
		le.PutUint16(b[42:], m.MaxC2S) // max_s2m_ring
		b[44] = m.MaxLog2Ring
	case MsgInit:
		le.PutUint16(b[2:], m.Version)
		le.PutUint32(b[4:], m.ID)
		b[8] = m.Mode
		copy(b[9:9+SecretLen], m.Secret)
		putStr(b[33:65], m.Name)
	case MsgAddRegion:
		le.PutUint16(b[2:], m.Index)
		le.PutUint64(b[4:], m.Size)
	case MsgAddRing:
		le.PutUint16(b[2:], m.Flags)
		le.PutUint16(b[4:], m.Index)
		le.PutUint16(b[6:], m.Region)
		le.PutUint32(b[8:], m.Offset)
		b[12] = m.Log2Ring
		le.PutUint16(b[13:], m.PrivHdrSize)
	case MsgConnect, MsgConnected:
		putStr(b[2:34], m.Name)
	case MsgDisconnect:
		le.PutUint32(b[2:], m.Code)
		putStr(b[6:6+discStringLen], m.Reason)
	}
}

// ErrMsg is the error of a message that is not a memif control message.
var ErrMsg = errors.New("memif: bad control message")

// Decode reads a control message. It checks only what every receiver needs:
// the size and a known type; the handshake checks the values.
func Decode(b []byte) (Msg, error) {
	if len(b) != MsgSize {
		return Msg{}, fmt.Errorf("%w: %d bytes, not %d", ErrMsg, len(b), MsgSize)
	}
	m := Msg{Type: MsgType(le.Uint16(b[0:]))}
	switch m.Type {
	case MsgAck:
	case MsgHello:
		m.Name = getStr(b[2:34])
		m.MinVersion = le.Uint16(b[34:])
		m.MaxVersion = le.Uint16(b[36:])
		m.MaxRegion = le.Uint16(b[38:])
		m.MaxS2C = le.Uint16(b[40:])
		m.MaxC2S = le.Uint16(b[42:])
		m.MaxLog2Ring = b[44]
	case MsgInit:
		m.Version = le.Uint16(b[2:])
		m.ID = le.Uint32(b[4:])
		m.Mode = b[8]
		m.Secret = cstr(b[9 : 9+SecretLen]) // 24 bytes, NUL-terminated only when shorter
		m.Name = getStr(b[33:65])
	case MsgAddRegion:
		m.Index = le.Uint16(b[2:])
		m.Size = le.Uint64(b[4:])
	case MsgAddRing:
		m.Flags = le.Uint16(b[2:])
		m.Index = le.Uint16(b[4:])
		m.Region = le.Uint16(b[6:])
		m.Offset = le.Uint32(b[8:])
		m.Log2Ring = b[12]
		m.PrivHdrSize = le.Uint16(b[13:])
	case MsgConnect, MsgConnected:
		m.Name = getStr(b[2:34])
	case MsgDisconnect:
		m.Code = le.Uint32(b[2:])
		m.Reason = getStr(b[6 : 6+discStringLen])
	default:
		return m, fmt.Errorf("%w: type %d", ErrMsg, uint16(m.Type))
	}
	return m, nil
}
