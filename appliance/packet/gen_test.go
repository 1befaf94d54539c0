package packet

import "math/rand/v2"

// chain describes a packet for genPacket: which headers, in RFC 8200 order.
type chain struct {
	tags    int    // VLAN tags, 0..2
	tpid0   uint16 // outer TPID when tags > 0; 0 picks the default
	v4      bool
	v4opts  int // IPv4 option bytes, a multiple of 4
	v4frag  int // IPv4: 0 none, 1 first fragment (MF), 2 later fragment
	hbh     int // Hop-by-Hop option data bytes; -1 none
	dest1   bool
	srh     int // SRH segments; 0 none
	srhTLV  int // SRH TLV data bytes; 0 none
	rtType  int // routing header of another type (e.g. 3) when srh == 0; 0 none
	frag    int // 0 none, 1 first fragment, 2 later fragment
	ah      bool
	esp     bool
	dest2   bool
	proto   uint8 // ProtocolUDP, ProtocolTCP, ProtocolNoNext, ...
	payload int
	trailer int // bytes after the IP packet
}

// genPacket builds the packet c describes with random field values, and the
// Layers that Parse must return for it, tracked independently of Parse.
func genPacket(r *rand.Rand, c chain) ([]byte, Layers) {
	var w Layers
	b := make([]byte, 0, 2048)
	grow := func(n int) []byte {
		l := len(b)
		for i := 0; i < n; i++ {
			b = append(b, byte(r.Uint32()))
		}
		return b[l : l+n]
	}

	// Ethernet.
	ef := EthernetFields{NumTags: c.tags}
	ef.Dst = MAC(grow(6))
	ef.Src = MAC(grow(6))
	b = b[:0]
	for i := 0; i < c.tags; i++ {
		ef.Tags[i] = VLANTag{PCP: uint8(r.IntN(8)), DEI: r.IntN(2) == 1, VID: uint16(r.IntN(4096))}
		w.VLAN[i] = ef.Tags[i].TCI()
	}
	if c.tags > 0 && c.tpid0 != 0 {
		ef.Tags[0].TPID = c.tpid0
	}
	ef.Type = EtherTypeIPv6
	if c.v4 {
		ef.Type = EtherTypeIPv4
	}
	Ethernet(grow(ef.HeaderLen())).Encode(&ef)
	w.VLANs = uint8(c.tags)
	w.EtherType = ef.Type
	w.L3 = uint16(len(b))

	if c.v4 {
		return genIPv4(r, c, &b, w, grow)
	}

	ip := grow(IPv6Len)
	l3 := len(b) - IPv6Len
	w.IPVersion = 6
	w.Flags = FlagIPv6
	nhAt := l3 + ipv6NextHdr // where the next header value goes
	// stopped: past a later fragment or ESP, the rest is opaque to the walk.
	stopped := false
	// next links a header of kind at off into the chain.
	next := func(kind uint8, off int) {
		b[nhAt] = kind
		nhAt = off
		if !stopped && kind != ProtocolESP && isWalked(kind) {
			w.NumExt++
		}
	}
	if c.hbh >= 0 {
		off := len(b)
		next(ProtocolHopByHop, off)
		opts := genOptions(r, c.hbh)
		PutIPv6Options(grow(IPv6OptionsLen(opts)), 0, opts)
		w.HopByHop = uint16(off)
	}
	if c.dest1 {
		off := len(b)
		next(ProtocolDestOpts, off)
		opts := genOptions(r, r.IntN(20))
		PutIPv6Options(grow(IPv6OptionsLen(opts)), 0, opts)
		if c.srh > 0 || c.rtType != 0 {
			w.DestOpts1 = uint16(off)
		} else {
			// No Routing header follows: these are for the final destination.
			w.DestOpts2 = uint16(off)
		}
	}
	if c.srh > 0 {
		off := len(b)
		next(ProtocolRouting, off)
		f := SRHFields{SegmentsLeft: uint8(r.IntN(c.srh + 1)), Flags: uint8(r.Uint32()), Tag: uint16(r.Uint32())}
		for i := 0; i < c.srh; i++ {
			f.Segments = append(f.Segments, [16]byte(randBytes(r, 16)))
		}
		if c.srhTLV > 0 {
			f.TLVs = []SRHTLV{{Type: 6 + uint8(r.IntN(100)), Data: randBytes(r, c.srhTLV)}}
		}
		PutSRH(grow(f.Len()), &f)
		w.Routing = uint16(off)
		w.Flags |= FlagSRH
	} else if c.rtType != 0 {
		off := len(b)
		next(ProtocolRouting, off)
		h := grow(8 * (1 + r.IntN(4)))
		h[1] = uint8(len(h)/8 - 1)
		h[2] = uint8(c.rtType)
		w.Routing = uint16(off)
	}
	if c.frag > 0 {
		off := len(b)
		next(ProtocolFragment, off)
		var fo uint16
		if c.frag == 2 {
			fo = uint16(8 * (1 + r.IntN(100)))
		}
		IPv6Fragment(grow(8)).Encode(0, fo, c.frag == 1, r.Uint32())
		w.Fragment = uint16(off)
		w.Flags |= FlagFragment
		if c.frag == 2 {
			w.Flags |= FlagLaterFragment
			w.L4 = uint16(len(b))
			stopped = true
		}
	}
	if c.ah {
		off := len(b)
		next(ProtocolAH, off)
		icv := 4 * (1 + 2*r.IntN(4)) // keeps the header a multiple of 8
		h := grow(AHMinLen + icv)
		h[1] = uint8(len(h)/4 - 2)
		h[2], h[3] = 0, 0
		if !stopped {
			w.AH = uint16(off)
		}
	}
	if c.esp {
		off := len(b)
		next(ProtocolESP, off)
		grow(ESPMinLen + 16 + r.IntN(40))
		if !stopped {
			w.ESP = uint16(off)
			w.Flags |= FlagESP
			w.L4 = uint16(off)
			w.Proto = ProtocolESP
			stopped = true
		}
	} else {
		if c.dest2 {
			off := len(b)
			next(ProtocolDestOpts, off)
			opts := genOptions(r, r.IntN(30))
			PutIPv6Options(grow(IPv6OptionsLen(opts)), 0, opts)
			if !stopped {
				w.DestOpts2 = uint16(off)
			}
		}
		off := len(b)
		next(c.proto, off)
		if !stopped {
			w.L4 = uint16(off)
			w.Proto = c.proto
		}
		switch c.proto {
		case ProtocolUDP:
			u := UDP(grow(UDPLen + c.payload))
			u.Encode(&UDPFields{SrcPort: uint16(r.Uint32()), DstPort: uint16(r.Uint32()), Length: uint16(len(u))})
			if !stopped {
				w.Flags |= FlagUDP
			}
		case ProtocolTCP:
			grow(20 + c.payload)[12] = 5 << 4 // data offset: no options
		default: // No Next Header too: bytes after it are ignored (RFC 8200 §4.7)
			grow(c.payload)
		}
	}
	if c.frag == 2 {
		w.Proto = b[w.Fragment] // the Fragment header's next header
	}
	end := len(b)
	IPv6(ip).Encode(&IPv6Fields{
		TrafficClass: uint8(r.Uint32()), FlowLabel: r.Uint32(), HopLimit: uint8(r.Uint32()),
		PayloadLength: uint16(end - l3 - IPv6Len), NextHeader: b[l3+ipv6NextHdr],
		Src: [16]byte(randBytes(r, 16)), Dst: [16]byte(randBytes(r, 16)),
	})
	w.End = uint32(end)
	if w.Flags&FlagUDP != 0 {
		UDP(b[w.L4:end]).SetChecksum(w.UDPChecksum(b))
	}
	grow(c.trailer)
	if c.trailer > 0 {
		w.Flags |= FlagTrailer
	}
	w.Len = uint32(len(b))
	return b, w
}

func genIPv4(r *rand.Rand, c chain, bp *[]byte, w Layers, grow func(int) []byte) ([]byte, Layers) {
	l3 := len(*bp)
	f := IPv4Fields{
		TOS: uint8(r.Uint32()), ID: uint16(r.Uint32()), TTL: uint8(r.Uint32()), Protocol: c.proto,
		Src: [4]byte(randBytes(r, 4)), Dst: [4]byte(randBytes(r, 4)),
	}
	for i := 0; i < c.v4opts; i += 4 {
		// Router Alert (RFC 2113) or four No Operations: options a decoder knows.
		if r.IntN(2) == 0 {
			f.Options = append(f.Options, 0x94, 4, 0, 0)
		} else {
			f.Options = append(f.Options, 1, 1, 1, 1)
		}
	}
	w.IPVersion = 4
	w.Flags = FlagIPv4
	if c.v4opts > 0 {
		w.Flags |= FlagIPv4Options
	}
	switch c.v4frag {
	case 1:
		f.Flags = IPv4FlagMoreFragments
		w.Flags |= FlagFragment
	case 2:
		f.FragmentOffset = uint16(8 * (1 + r.IntN(100)))
		w.Flags |= FlagFragment | FlagLaterFragment
	}
	hdr := grow(f.HeaderLen())
	off := len(*bp)
	w.L4 = uint16(off)
	w.Proto = c.proto
	later := c.v4frag == 2
	if c.ah {
		f.Protocol = ProtocolAH
		w.Proto = ProtocolAH
		h := grow(AHMinLen + 4*r.IntN(4))
		h[0] = c.proto
		h[1] = uint8(len(h)/4 - 2)
		if c.esp {
			h[0] = ProtocolESP
		}
		if !later {
			w.AH = uint16(off)
			w.NumExt = 1
			w.L4 = uint16(len(*bp))
			w.Proto = h[0]
		}
	} else if c.esp {
		f.Protocol = ProtocolESP
		w.Proto = ProtocolESP
	}
	if c.esp {
		if !later {
			w.ESP = uint16(len(*bp))
			w.Flags |= FlagESP
		}
		grow(ESPMinLen + 16 + r.IntN(40))
	} else {
		switch c.proto {
		case ProtocolUDP:
			u := UDP(grow(UDPLen + c.payload))
			u.Encode(&UDPFields{SrcPort: uint16(r.Uint32()), DstPort: uint16(r.Uint32()), Length: uint16(len(u))})
			if !later {
				w.Flags |= FlagUDP
			}
		case ProtocolTCP:
			grow(20 + c.payload)[12] = 5 << 4 // data offset: no options
		default:
			grow(c.payload)
		}
	}
	end := len(*bp)
	f.TotalLength = uint16(end - l3)
	ip := IPv4(hdr)
	ip.Encode(&f)
	ip.SetChecksum(ip.CalculateChecksum())
	w.End = uint32(end)
	if w.Flags&FlagUDP != 0 {
		UDP((*bp)[w.L4:end]).SetChecksum(w.UDPChecksum(*bp))
	}
	grow(c.trailer)
	if c.trailer > 0 {
		w.Flags |= FlagTrailer
	}
	w.Len = uint32(len(*bp))
	return *bp, w
}

// genOptions makes options with about n data bytes: a mix of PadN, Pad1 and
// option types a node skips.
func genOptions(r *rand.Rand, n int) []IPv6Option {
	var opts []IPv6Option
	for n > 0 {
		switch r.IntN(4) {
		case 0:
			opts = append(opts, IPv6Option{Type: IPv6OptPad1})
			n--
		case 1:
			k := min(n, 1+r.IntN(5))
			opts = append(opts, IPv6Option{Type: IPv6OptPadN, Data: make([]byte, k)})
			n -= k
		default:
			k := min(n, 1+r.IntN(24))
			opts = append(opts, IPv6Option{Type: 0x1e + uint8(r.IntN(2)), Data: randBytes(r, k)})
			n -= k
		}
	}
	return opts
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// isWalked reports whether Parse walks a header of this kind as an extension
// header.
func isWalked(kind uint8) bool {
	switch kind {
	case ProtocolHopByHop, ProtocolDestOpts, ProtocolRouting, ProtocolFragment, ProtocolAH:
		return true
	}
	return false
}

// randomChain picks a chain of the kinds the benchmark and cross-checks use.
func randomChain(r *rand.Rand) chain {
	c := chain{tags: r.IntN(3), hbh: -1, proto: ProtocolUDP, payload: r.IntN(200)}
	if r.IntN(8) == 0 {
		c.v4 = true
		c.v4opts = 4 * r.IntN(4)
		return c
	}
	if r.IntN(2) == 0 {
		c.hbh = r.IntN(40)
	}
	if r.IntN(4) != 0 {
		c.srh = 1 + r.IntN(5)
		c.dest1 = r.IntN(3) == 0
	}
	c.dest2 = r.IntN(3) == 0
	return c
}
