package rlnc

import (
	"errors"

	"github.com/linerate/linerate/appliance/packet"
)

// Drop reasons. Every malformed header has its own, so an operator sees which
// rule a peer broke.
var (
	reasonTruncated  = packet.RegisterReason("rlnc_truncated")
	reasonVersion    = packet.RegisterReason("rlnc_bad_version")
	reasonField      = packet.RegisterReason("rlnc_unknown_field")
	reasonZeroK      = packet.RegisterReason("rlnc_zero_k")
	reasonLength     = packet.RegisterReason("rlnc_bad_length")
	reasonSmallN     = packet.RegisterReason("rlnc_small_n")
	reasonBlocksUsed = packet.RegisterReason("rlnc_bad_blocks_used")
	reasonZeroVector = packet.RegisterReason("rlnc_zero_vector")
	reasonSystematic = packet.RegisterReason("rlnc_bad_systematic")
	reasonStale      = packet.RegisterReason("rlnc_stale_gen")
	reasonTooBig     = packet.RegisterReason("rlnc_too_big")
	reasonNonInnov   = packet.Expected(packet.RegisterReason("rlnc_non_innovative"),
		"coded packets that add nothing to what the node holds: the redundancy a recoder mixes in")
	reasonLate = packet.Expected(packet.RegisterReason("rlnc_late"),
		"coded packets of a generation already decoded or spent: the redundancy the encoder sent beyond the link's loss")
	reasonMismatch = packet.RegisterReason("rlnc_gen_mismatch")
	reasonNoMemory = packet.RegisterReason("rlnc_no_memory")
)

// reasonOf names the drop for a Parse error.
func reasonOf(err error) packet.Reason {
	switch {
	case errors.Is(err, ErrVersion):
		return reasonVersion
	case errors.Is(err, ErrField):
		return reasonField
	case errors.Is(err, ErrZeroK):
		return reasonZeroK
	case errors.Is(err, ErrLength):
		return reasonLength
	case errors.Is(err, ErrSmallN):
		return reasonSmallN
	case errors.Is(err, ErrBlocksUsed):
		return reasonBlocksUsed
	case errors.Is(err, ErrZeroVector):
		return reasonZeroVector
	case errors.Is(err, ErrNotSystematic):
		return reasonSystematic
	}
	return reasonTruncated
}
