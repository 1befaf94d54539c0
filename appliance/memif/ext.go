package memif

// The external-stage extension of the descriptor (ExtVersion 1), between
// linerate's external stage (the client) and an out-of-process plugin (the
// server). Plain memif leaves Metadata to the application; this gives it a
// meaning on each ring:
//
//   - C2S, a packet lent to the plugin: Region, Offset and Length are its
//     data; Metadata is its headroom (low 16 bits: the bytes of its buffer in
//     front of Offset) and tailroom (high 16 bits: the bytes after the data),
//     so the plugin may grow the packet within its own buffer.
//   - S2C, the plugin's verdict on a lent packet: results come back in the
//     order the packets were lent, one per packet, so a result names no
//     buffer; Offset and Length are the packet's data window afterwards,
//     which must lie inside the buffer it was lent (the host checks, and
//     drops the packet as ext_bad_window otherwise). Region must be the one
//     it was lent in. Metadata is the verdict word: ExtVerdict, and the port
//     or reason in its high 16 bits.
//
// The host's S2C slots carry no buffers: the host gives every slot back at
// once, and only ever lends as many packets as a ring holds.
const ExtVersion = 1

// Verdict codes of the S2C verdict word's low 4 bits.
const (
	ExtContinue = 0 // on to the stage after the external stage
	ExtForward  = 1 // to the port in the high 16 bits
	ExtDrop     = 2 // freed, counted under the plugin's reason in the high 16 bits
	ExtConsume  = 3 // the plugin is done with it: freed, uncounted
	// ExtMarked (bit 4) marks the packet: the host counts it.
	ExtMarked = 1 << 4
)

// ExtRooms packs a lent packet's headroom and tailroom.
func ExtRooms(headroom, tailroom int) uint32 {
	return uint32(min(headroom, 0xFFFF)) | uint32(min(tailroom, 0xFFFF))<<16
}

// ExtVerdict packs a verdict word.
func ExtVerdict(code uint32, arg uint16) uint32 { return code | uint32(arg)<<16 }
