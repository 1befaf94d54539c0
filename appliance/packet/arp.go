package packet

import "encoding/binary"

// ARP is an ARP packet for IPv4 over Ethernet (RFC 826):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Hardware Type         |         Protocol Type         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  HW Addr Len  | Proto Addr Len|           Operation           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Sender Hardware Address (6 bytes)             |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |  Sender Protocol Address      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  (cont.)                      |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                 Target Hardware Address (6 bytes)             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Target Protocol Address                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Validate it once; the other accessors then read without checks.
type ARP []byte

// ARP sizes and values.
const (
	ARPLen = 28 // Ethernet and IPv4 addresses

	ARPHardwareEthernet = 1
	ARPRequest          = 1
	ARPReply            = 2

	arpHType = 0
	arpPType = 2
	arpHLen  = 4
	arpPLen  = 5
	arpOp    = 6
	arpSHA   = 8
	arpSPA   = 14
	arpTHA   = 18
	arpTPA   = 24
)

// Validate checks the length and that the packet maps IPv4 to Ethernet
// addresses: hardware type 1, protocol type 0x0800, lengths 6 and 4. Others are
// ErrBadLength when the lengths differ, ErrBadVersion when the types do.
func (b ARP) Validate() error {
	if len(b) < ARPLen {
		return ErrTruncated
	}
	if b.HardwareType() != ARPHardwareEthernet || b.ProtocolType() != EtherTypeIPv4 {
		return ErrBadVersion
	}
	if b[arpHLen] != 6 || b[arpPLen] != 4 {
		return ErrBadLength
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b ARP) IsValid() bool { return b.Validate() == nil }

// HardwareType is the hardware address space (1, Ethernet).
func (b ARP) HardwareType() uint16 { return binary.BigEndian.Uint16(b[arpHType:]) }

// ProtocolType is the protocol address space (0x0800, IPv4).
func (b ARP) ProtocolType() uint16 { return binary.BigEndian.Uint16(b[arpPType:]) }

// Op is the operation: ARPRequest or ARPReply.
func (b ARP) Op() uint16 { return binary.BigEndian.Uint16(b[arpOp:]) }

// SenderMAC is the Sender Hardware Address.
func (b ARP) SenderMAC() MAC { return MAC(b[arpSHA : arpSHA+6]) }

// SenderIP is the Sender Protocol Address.
func (b ARP) SenderIP() [4]byte { return [4]byte(b[arpSPA : arpSPA+4]) }

// TargetMAC is the Target Hardware Address.
func (b ARP) TargetMAC() MAC { return MAC(b[arpTHA : arpTHA+6]) }

// TargetIP is the Target Protocol Address.
func (b ARP) TargetIP() [4]byte { return [4]byte(b[arpTPA : arpTPA+4]) }

// SetOp sets the operation.
func (b ARP) SetOp(v uint16) { binary.BigEndian.PutUint16(b[arpOp:], v) }

// SetSender sets the sender's addresses.
func (b ARP) SetSender(m MAC, ip [4]byte) {
	copy(b[arpSHA:arpSHA+6], m[:])
	copy(b[arpSPA:arpSPA+4], ip[:])
}

// SetTarget sets the target's addresses.
func (b ARP) SetTarget(m MAC, ip [4]byte) {
	copy(b[arpTHA:arpTHA+6], m[:])
	copy(b[arpTPA:arpTPA+4], ip[:])
}

// ARPFields are the fields of an Ethernet/IPv4 ARP packet, for Encode.
type ARPFields struct {
	Op                   uint16
	SenderMAC, TargetMAC MAC
	SenderIP, TargetIP   [4]byte
}

// Fields returns the packet's fields.
func (b ARP) Fields() ARPFields {
	return ARPFields{Op: b.Op(), SenderMAC: b.SenderMAC(), SenderIP: b.SenderIP(),
		TargetMAC: b.TargetMAC(), TargetIP: b.TargetIP()}
}

// Encode writes f into b, which is at least ARPLen bytes, with the Ethernet and
// IPv4 types and lengths.
func (b ARP) Encode(f *ARPFields) {
	_ = b[ARPLen-1]
	binary.BigEndian.PutUint16(b[arpHType:], ARPHardwareEthernet)
	binary.BigEndian.PutUint16(b[arpPType:], EtherTypeIPv4)
	b[arpHLen], b[arpPLen] = 6, 4
	b.SetOp(f.Op)
	b.SetSender(f.SenderMAC, f.SenderIP)
	b.SetTarget(f.TargetMAC, f.TargetIP)
}
