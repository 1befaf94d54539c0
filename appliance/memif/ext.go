package memif

// The external-stage extension of the descriptor (ExtVersion 2), between
// linerate's external stage (the client) and an out-of-process plugin (the
// server). Plain memif leaves Metadata to the application; this gives it a
// meaning on each ring. A link has two rings each way:
//
//   - C2S ring 0, a packet lent to the plugin: Region, Offset and Length are
//     its data; Metadata is its headroom (low 16 bits: the bytes of its
//     buffer in front of Offset) and tailroom (high 16 bits: the bytes after
//     the data), so the plugin may grow the packet within its own buffer.
//   - S2C ring 0, the plugin's verdict on a lent packet: results come back in
//     the order the packets were lent, one per packet, so a result names no
//     buffer; Offset and Length are the packet's data window afterwards,
//     which must lie inside the buffer it was lent (the host checks, and
//     drops the packet as bad_window otherwise). Region must be the one it
//     was lent in. Metadata is the verdict word: ExtVerdict, and the port or
//     reason in its high 16 bits.
//   - C2S ring 1, spare buffers: empty buffers of linerate's shared pools,
//     lent for the plugin to make packets in (the SDK's Setup.Pool). Region
//     and Offset are the buffer's first byte, Length its size; Metadata is
//     ExtSpare: the headroom a fresh packet leaves (low 16 bits) and the
//     buffer's id (high 16 bits, below ExtMaxSpare). The plugin keeps them as
//     long as it likes; the host lends at most as many as the ring holds.
//   - S2C ring 1, emits: a packet the plugin made, in a spare buffer. Region,
//     Offset and Length are its data, inside that buffer; Metadata is
//     ExtEmit: ExtForward with the port in the high 16 bits (the plugin's
//     Env.Emit), or ExtContinue (on to the stage after the external stage:
//     what the plugin's Produce made), and the buffer's id in bits 5..15.
//     The buffer goes back to the host with it. A descriptor whose id is not
//     lent to the plugin at that moment (forged, or returned already), whose
//     region or window leaves the buffer, or whose code is neither is
//     dropped and counted (bad_emit); a buffer it named is freed.
//
// The host's S2C slots carry no buffers: the host gives every slot back at
// once, and only ever lends as many packets (ring 0) or spare buffers (ring
// 1) as a ring holds, so neither S2C ring can overflow.
const ExtVersion = 2

// ExtMinVersion is the oldest extension the host still speaks: a plugin of
// version 1 has neither spare nor emit rings (it makes no packets), and its
// link has one ring each way.
const ExtMinVersion = 1

// Verdict codes of the S2C verdict word's low 4 bits.
const (
	ExtContinue = 0 // on to the stage after the external stage
	ExtForward  = 1 // to the port in the high 16 bits
	ExtDrop     = 2 // freed, counted under the plugin's reason in the high 16 bits
	ExtConsume  = 3 // the plugin is done with it: freed, uncounted
	// ExtMarked (bit 4) marks the packet: the host counts it.
	ExtMarked = 1 << 4
)

// ExtMaxSpare bounds the spare buffers lent to one instance: their ids fit
// bits 5..15 of an emit's word.
const ExtMaxSpare = 1 << 11

// ExtRooms packs a lent packet's headroom and tailroom.
func ExtRooms(headroom, tailroom int) uint32 {
	return uint32(min(headroom, 0xFFFF)) | uint32(min(tailroom, 0xFFFF))<<16
}

// ExtVerdict packs a verdict word.
func ExtVerdict(code uint32, arg uint16) uint32 { return code | uint32(arg)<<16 }

// ExtSpare packs a spare buffer's word: a fresh packet's headroom and the
// buffer's id.
func ExtSpare(headroom int, id uint16) uint32 {
	return uint32(min(headroom, 0xFFFF)) | uint32(id)<<16
}

// ExtEmit packs an emit's word: ExtForward to port arg, or ExtContinue, for
// the spare buffer id.
func ExtEmit(code uint32, arg, id uint16) uint32 {
	return code&0xF | uint32(id%ExtMaxSpare)<<5 | uint32(arg)<<16
}

// ExtEmitID is the spare buffer an emit's word names.
func ExtEmitID(word uint32) uint16 { return uint16(word>>5) % ExtMaxSpare }
