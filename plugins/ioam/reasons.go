package ioam

import "github.com/linerate/linerate/appliance/packet"

// Drop reasons of the IOAM stages.
var (
	reasonTruncated  = packet.RegisterReason("ioam_truncated")       // an IOAM option runs past its header or is too short for its type
	reasonBadLength  = packet.RegisterReason("ioam_bad_length")      // NodeLen or RemainingLen inconsistent with the trace type
	reasonHbHTooLong = packet.RegisterReason("ioam_hbh_too_long")    // the options header runs past the packet
	reasonTooLong    = packet.RegisterReason("ioam_option_too_long") // trace data beyond 244 bytes
	reasonMisaligned = packet.RegisterReason("ioam_misaligned")      // an IOAM option not 4n-aligned (RFC 9486 §4)
	reasonHopLimit   = packet.RegisterReason("ioam_hop_limit")       // hop limit exhausted at a routing transit node
	reasonOverrun    = packet.RegisterReason("ioam_option_overrun")  // inline encap: the packet's own options header is malformed
)

// dropReason maps a codec error to its drop reason.
func dropReason(err error) packet.Reason {
	switch err {
	case ErrNodeLen, ErrRemainingLen:
		return reasonBadLength
	case ErrHopByHop:
		return reasonHbHTooLong
	case ErrTooLong:
		return reasonTooLong
	case ErrMisaligned:
		return reasonMisaligned
	case ErrOptionOverrun:
		return reasonOverrun
	}
	return reasonTruncated
}
