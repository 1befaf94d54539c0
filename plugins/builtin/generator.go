package builtin

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "generator", Summary: "make IPv6 or IPv4 UDP flows of given sizes, rate and count, with a sequence number and tx timestamp", New: newGenerator})
}

// Generator payload: the first GenFieldsLen bytes after the UDP header, when the
// frame has room for them. The sink reads them back.
//
//	0                   1                   2                   3
//	0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Flow ID            |    Trial      |               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+  Sequence     |
//	|                    Number (40 bits)                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              Tx Timestamp (64 bits, monotonic ns)             |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const GenFieldsLen = 16

// A generator with trial = 0 (the default) has no Trial octet: its sequence
// numbers take all 48 bits. With a trial tag (1..255, linerate test's trial
// id) the tag takes the sequence's top 8 bits, so that a sink told the same
// tag can tell a late packet of an earlier trial from its own; the tag fits
// the 16 bytes a 64-byte IPv4 frame has room for.
const (
	seqMask48  = 1<<48 - 1
	seqMask40  = 1<<40 - 1
	trialShift = 40
)

// fcsLen: sizes are Ethernet frame sizes as RFC 2544 counts them, with the 4-byte
// FCS that no buffer holds; a 64-byte frame is 60 bytes of data.
const fcsLen = 4

type generatorConfig struct {
	Flows      int               `toml:"flows"`
	IPVersion  int               `toml:"ip_version"`
	Src        config.Addr       `toml:"src"`
	Dst        config.Addr       `toml:"dst"`
	SrcMAC     config.MAC        `toml:"src_mac"`
	DstMAC     config.MAC        `toml:"dst_mac"`
	VLAN       int               `toml:"vlan"`
	UDPSrcPort int               `toml:"udp_src_port"`
	UDPDstPort int               `toml:"udp_dst_port"`
	Sizes      []int             `toml:"sizes"`
	Rate       config.PacketRate `toml:"rate"`
	Count      uint64            `toml:"count"`
	Duration   config.Duration   `toml:"duration"`
	CatchUp    config.Duration   `toml:"catch_up"`
	Pattern    string            `toml:"pattern"`
	Pool       string            `toml:"pool"`
	HopLimit   int               `toml:"hop_limit"`
	Checksum   *bool             `toml:"udp_checksum"`
	Trial      int               `toml:"trial"`
}

// template is one frame size's prebuilt headers and payload pattern.
type template struct {
	data   []byte
	l3, l4 int // offsets of the IP and UDP headers
	udpSum uint16
	// fixedSum, in a finished per-flow template, is udpSum plus the words of
	// the generator fields that never change for the flow (its Flow ID and
	// the trial tag): fillFast adds only the sequence number's and the
	// timestamp's.
	fixedSum uint16
	ipSum    uint16 // IPv4 header checksum field
	fields   bool   // the frame has room for the generator fields
	payload  int    // offset of the payload
	// small holds frames of at most 64 bytes, zero-padded, as eight words:
	// copy64 writes them with eight stores, where a [64]byte assignment or
	// copy is a call to memmove.
	small *[8]uint64
}

// flowDelta is what changes per flow: the low 16 bits of the source address and
// the UDP source port, with the checksum adjustments they cause.
type flowDelta struct {
	addrLow uint16
	port    uint16
	udpAdj  uint16 // ones'-complement sum to add to the UDP checksum
	ipAdj   uint16 // ... and to the IPv4 header checksum
}

type generator struct {
	cfg       generatorConfig // as read: Reload compares against it
	instances int
	tmpl      []template
	perFlow   []template // finished templates by flow, then size; nil when too big
	flows     []flowDelta
	seq       []uint64
	seqTag    uint64 // the trial tag, in place
	seqMask   uint64
	pool      packet.Pool
	sized     packet.SizedAllocator // pool's, for fillFast: packets come with their length
	rate      float64               // packets per ns; 0 = flat out
	tokens    float64
	last      int64
	count     uint64 // 0 = unlimited
	duration  int64
	started   int64
	begun     bool // started is set: virtual time may start at zero
	sent      uint64
	nextT     int   // next template (size)
	nextF     int   // next index into mine
	mine      []int // the flows this lcore sends: flow f belongs to lcore f mod lcores
	fast      bool  // fillFast applies
	burstCap  float64
	catchUp   float64 // ns of rate credit kept across a stall
	v4        bool
	csum      bool
	done      atomic.Bool // read by the engine's watcher: Done
	cSent     *stats.Counter
	cBytes    *stats.Counter
	cNoBuf    *stats.Counter
}

func readGenerator(cfg plugins.Config) (generatorConfig, error) {
	c := generatorConfig{Flows: 1, IPVersion: 6, UDPSrcPort: 10000, UDPDstPort: 20000, Pattern: "incr", Pool: "default", HopLimit: 64,
		CatchUp: config.Duration(10 * time.Millisecond)}
	err := cfg.Decode(&c)
	return c, err
}

func newGenerator(s *plugins.Setup) (plugins.Stage, error) {
	c, err := readGenerator(s.Config)
	if err != nil {
		return nil, err
	}
	read := c
	if c.Flows < 1 || c.Flows > 65536 {
		return nil, fmt.Errorf("generator: flows %d is outside 1..65536", c.Flows)
	}
	if c.IPVersion != 4 && c.IPVersion != 6 {
		return nil, fmt.Errorf("generator: ip_version must be 4 or 6")
	}
	if c.Trial < 0 || c.Trial > 255 {
		return nil, fmt.Errorf("generator: trial %d is outside 0..255", c.Trial)
	}
	src, dst := c.Src.Addr, c.Dst.Addr
	if !src.IsValid() || !dst.IsValid() {
		return nil, fmt.Errorf("generator needs src and dst addresses")
	}
	if want4 := c.IPVersion == 4; src.Is4() != want4 || dst.Is4() != want4 {
		return nil, fmt.Errorf("generator: src and dst must be IPv%d addresses", c.IPVersion)
	}
	if c.VLAN < 0 || c.VLAN > 4094 {
		return nil, fmt.Errorf("generator: vlan %d is outside 0..4094", c.VLAN)
	}
	if c.UDPSrcPort < 0 || c.UDPSrcPort > 65535 || c.UDPDstPort < 0 || c.UDPDstPort > 65535 {
		return nil, fmt.Errorf("generator: UDP ports must be within 0..65535")
	}
	if c.HopLimit < 1 || c.HopLimit > 255 {
		return nil, fmt.Errorf("generator: hop_limit %d is outside 1..255", c.HopLimit)
	}
	pool, err := s.Pool(c.Pool, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("generator: pool %q: %w", c.Pool, err)
	}
	fill, err := parsePattern(c.Pattern)
	if err != nil {
		return nil, err
	}
	g := &generator{cfg: read, instances: max(s.NumInstances, 1), pool: pool, count: c.Count, duration: int64(time.Duration(c.Duration)), v4: c.IPVersion == 4,
		csum:   c.Checksum == nil || *c.Checksum,
		cSent:  s.Counters.New("sent", "packets generated"),
		cBytes: s.Counters.New("sent_bytes", "bytes generated"),
		cNoBuf: s.Counters.New("no_buffer", "packets not generated because the pool was empty")}
	if c.CatchUp > config.Duration(time.Second) {
		return nil, fmt.Errorf("generator: catch_up %v is over 1s", c.CatchUp)
	}
	g.catchUp = float64(c.CatchUp)
	g.setRate(c.Rate)
	// Several lcores split the rate and the count.
	if s.NumInstances > 1 {
		if g.count > 0 {
			g.count = (g.count + uint64(s.NumInstances-1-s.Instance)) / uint64(s.NumInstances)
		}
	}
	hdr := 14
	if c.VLAN > 0 {
		hdr += 4
	}
	ipLen := 40
	if g.v4 {
		ipLen = 20
	}
	if len(c.Sizes) == 0 {
		// The smallest frame that carries the generator fields, and at least 64
		// bytes: a 64-byte frame cannot hold IPv6 and UDP.
		c.Sizes = []int{max(64, hdr+ipLen+8+GenFieldsLen+fcsLen)}
	}
	for _, size := range c.Sizes {
		n := size - fcsLen
		if n < hdr+ipLen+8 {
			return nil, fmt.Errorf("generator: size %d is below the %d-byte minimum for IPv%d UDP", size, hdr+ipLen+8+fcsLen, c.IPVersion)
		}
		if n > pool.DataRoom() {
			return nil, fmt.Errorf("generator: size %d does not fit pool %q (data room %d)", size, c.Pool, pool.DataRoom())
		}
		g.tmpl = append(g.tmpl, buildTemplate(n, &c, src, dst, fill))
	}
	base := g.tmpl[0]
	for f := 0; f < c.Flows; f++ {
		d := flowDelta{port: uint16(c.UDPSrcPort + f)}
		a := addrBytes(src)
		low := binary.BigEndian.Uint16(a[len(a)-2:])
		d.addrLow = low + uint16(f)
		// The template holds flow 0: the deltas are new − old in ones' complement.
		oldPort := binary.BigEndian.Uint16(base.data[base.l4:])
		d.udpAdj = packet.ChecksumCombine(packet.ChecksumCombine(^low, d.addrLow), packet.ChecksumCombine(^oldPort, d.port))
		d.ipAdj = packet.ChecksumCombine(^low, d.addrLow)
		g.flows = append(g.flows, d)
	}
	g.seq = make([]uint64, c.Flows)
	g.seqMask = seqMask48
	if c.Trial != 0 {
		g.seqTag, g.seqMask = uint64(c.Trial)<<trialShift, seqMask40
	}
	// Each flow belongs to one lcore, so its sequence numbers stay one series.
	for f := 0; f < c.Flows; f++ {
		if f%max(s.NumInstances, 1) == s.Instance {
			g.mine = append(g.mine, f)
		}
	}
	if len(g.mine) == 0 {
		return nil, fmt.Errorf("generator: %d flows for %d lcores: every lcore needs a flow of its own", c.Flows, s.NumInstances)
	}
	// When flows × sizes is small, keep a finished template per flow and size, so a
	// packet needs only its sequence number, timestamp and UDP checksum. Frames
	// of at most 64 bytes get 4 MiB, which takes every flow (65536): the flows
	// go round-robin, so their templates are read in order, a stream the
	// prefetcher keeps ahead of, and a packet's cost stays flat however many
	// flows there are.
	total, nSmall := 0, 0
	for _, t := range g.tmpl {
		total += len(t.data) * c.Flows
		if len(t.data) <= 64 {
			nSmall++
		}
	}
	limit := 1 << 20
	if nSmall == len(g.tmpl) {
		limit = 4 << 20
	}
	if total <= limit {
		// The 64-byte frames in one array, in the order they are sent: one
		// cache line each, read as one stream.
		smalls := make([][8]uint64, 0, nSmall*c.Flows) // never grows
		for f := range g.flows {
			for _, t := range g.tmpl {
				ft := t
				ft.data = append([]byte(nil), t.data...)
				g.patchFlow(ft.data, &ft, &g.flows[f])
				ft.udpSum = packet.ChecksumCombine(t.udpSum, g.flows[f].udpAdj)
				ft.fixedSum = packet.ChecksumCombine(ft.udpSum, wordSum(uint64(f)<<48|g.seqTag, 0))
				if !ft.fields && g.csum {
					// Nothing changes per packet: the checksum is final already.
					c := ^ft.udpSum
					if c == 0 {
						c = 0xFFFF
					}
					binary.BigEndian.PutUint16(ft.data[ft.l4+6:], c)
				}
				if len(ft.data) <= 64 {
					var b [64]byte
					copy(b[:], ft.data)
					smalls = append(smalls, [8]uint64{})
					ft.small = &smalls[len(smalls)-1]
					for i := range ft.small {
						ft.small[i] = binary.LittleEndian.Uint64(b[8*i:])
					}
				}
				g.perFlow = append(g.perFlow, ft)
			}
		}
	}
	g.fast = g.perFlow != nil && len(g.tmpl) == 1 && g.perFlow[0].small != nil && g.csum && pool.DataRoom() >= 64
	if g.fast {
		g.sized, _ = pool.(packet.SizedAllocator)
	}
	return g, nil
}

// setRate sets this instance's share of rate (0: flat out).
func (g *generator) setRate(rate config.PacketRate) {
	g.rate = max(float64(rate), 0) / 1e9 / float64(g.instances)
	// Rate credit saved while the lcore was busy elsewhere: up to catch_up of
	// it (10 ms), so the average rate holds across a stall, and at least one
	// burst.
	g.burstCap = max(packet.MaxBurst, g.rate*g.catchUp)
	g.tokens = min(g.tokens, g.burstCap)
}

// Reload takes a new rate; every other key shapes the prebuilt frames or the
// flows' split over instances, and changes only with a restart.
func (g *generator) Reload(_ *plugins.Context, cfg plugins.Config) (func(), error) {
	c, err := readGenerator(cfg)
	if err != nil {
		return nil, err
	}
	if key := config.FirstDiff(g.cfg, c, "rate"); key != "" {
		return nil, fmt.Errorf("generator: %s: changes only with a restart; a reload changes the rate", key)
	}
	return func() {
		g.setRate(c.Rate)
		g.cfg = c
	}, nil
}

// patchFlow writes flow f's source address bits and port into frame d.
func (g *generator) patchFlow(d []byte, t *template, f *flowDelta) {
	if g.v4 {
		binary.BigEndian.PutUint16(d[t.l3+14:], f.addrLow)
		binary.BigEndian.PutUint16(d[t.l3+10:], ^packet.ChecksumCombine(^t.ipSum, f.ipAdj))
	} else {
		binary.BigEndian.PutUint16(d[t.l3+22:], f.addrLow)
	}
	binary.BigEndian.PutUint16(d[t.l4:], f.port)
}

func addrBytes(a netip.Addr) []byte {
	if a.Is4() {
		b := a.As4()
		return b[:]
	}
	b := a.As16()
	return b[:]
}

// parsePattern returns the payload filler: "zero", "incr" (0,1,2…), "random"
// (fixed per run), or one byte as "0xAB".
func parsePattern(p string) (func([]byte), error) {
	switch p {
	case "zero":
		return func(b []byte) { clear(b) }, nil
	case "incr", "":
		return func(b []byte) {
			for i := range b {
				b[i] = byte(i)
			}
		}, nil
	case "random":
		r := rand.New(rand.NewPCG(1, 2))
		return func(b []byte) {
			for i := range b {
				b[i] = byte(r.Uint32())
			}
		}, nil
	}
	if v, err := strconv.ParseUint(strings.TrimPrefix(p, "0x"), 16, 8); err == nil && strings.HasPrefix(p, "0x") {
		return func(b []byte) {
			for i := range b {
				b[i] = byte(v)
			}
		}, nil
	}
	return nil, fmt.Errorf("generator: pattern %q is not zero, incr, random or 0xNN", p)
}

// buildTemplate writes every header of an n-byte frame for flow 0 with the
// generator fields zeroed, and its checksums.
func buildTemplate(n int, c *generatorConfig, src, dst netip.Addr, fill func([]byte)) template {
	t := template{data: make([]byte, n)}
	d := t.data
	copy(d[0:6], c.DstMAC[:])
	copy(d[6:12], c.SrcMAC[:])
	off := 12
	if c.VLAN > 0 {
		binary.BigEndian.PutUint16(d[12:], 0x8100)
		binary.BigEndian.PutUint16(d[14:], uint16(c.VLAN))
		off = 16
	}
	t.l3 = off + 2
	udpLen := 0
	var pseudo uint16
	if src.Is4() {
		binary.BigEndian.PutUint16(d[off:], 0x0800)
		ip := d[t.l3 : t.l3+20]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(n-t.l3))
		ip[6] = 0x40 // DF
		ip[8] = byte(c.HopLimit)
		ip[9] = 17
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:], ^packet.Checksum(ip, 0))
		t.ipSum = binary.BigEndian.Uint16(ip[10:])
		t.l4 = t.l3 + 20
		udpLen = n - t.l4
		pseudo = packet.PseudoHeaderChecksum(17, s4[:], d4[:], uint32(udpLen))
	} else {
		binary.BigEndian.PutUint16(d[off:], 0x86DD)
		ip := d[t.l3 : t.l3+40]
		ip[0] = 0x60
		t.l4 = t.l3 + 40
		udpLen = n - t.l4
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = 17
		ip[7] = byte(c.HopLimit)
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:24], s16[:])
		copy(ip[24:40], d16[:])
		pseudo = packet.PseudoHeaderChecksum(17, s16[:], d16[:], uint32(udpLen))
	}
	u := d[t.l4:]
	binary.BigEndian.PutUint16(u[0:], uint16(c.UDPSrcPort))
	binary.BigEndian.PutUint16(u[2:], uint16(c.UDPDstPort))
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	t.payload = t.l4 + 8
	fill(d[t.payload:])
	t.fields = n-t.payload >= GenFieldsLen
	if t.fields {
		clear(d[t.payload : t.payload+GenFieldsLen])
	}
	// Sum of the UDP header and payload with a zero checksum field, plus the
	// pseudo-header: per packet only the generator fields are added to it.
	t.udpSum = packet.Checksum(u[:udpLen], pseudo)
	return t
}

// Produce appends as many packets as the rate, the count and the burst's room
// allow.
func (g *generator) Produce(ctx *plugins.Context, b *packet.Burst) {
	if g.done.Load() {
		return
	}
	now := ctx.Now
	if !g.begun {
		g.started, g.last, g.begun = now, now, true
	}
	if g.duration > 0 && now-g.started >= g.duration {
		g.done.Store(true)
		return
	}
	n := b.Room()
	if g.rate > 0 {
		g.tokens += float64(now-g.last) * g.rate
		if g.tokens > g.burstCap {
			g.tokens = g.burstCap
		}
		g.last = now
		if int(g.tokens) < n {
			n = int(g.tokens)
		}
	}
	if g.count > 0 && uint64(n) > g.count-g.sent {
		n = int(g.count - g.sent)
	}
	if n <= 0 {
		return
	}
	start := b.N
	var got int
	if g.sized != nil {
		got = g.sized.AllocSized(b, n, len(g.perFlow[0].data))
	} else {
		got = g.pool.Alloc(b, n)
	}
	if got < n {
		g.cNoBuf.Add(uint64(n - got))
	}
	var bytes uint64
	if g.fast {
		bytes = g.fillFast(b.H[start:b.N], now, g.sized == nil)
	} else {
		for i := start; i < b.N; i++ {
			bytes += uint64(g.fill(b.H[i].P(), now))
		}
	}
	g.tokens -= float64(got)
	g.sent += uint64(got)
	g.cSent.Add(uint64(got))
	g.cBytes.Add(bytes)
	if g.count > 0 && g.sent >= g.count {
		g.done.Store(true)
	}
}

// fillFast is fill for the common lab and benchmark shape — one size of at most
// 64 bytes, templates finished per flow, checksum on — as one loop over the
// burst with the generator's state in locals. With one size, the length and
// the offsets are every flow's, read once; per packet only the flow's
// template, sum and sequence number change. The timestamp's share of the UDP
// checksum is summed once per burst, and a packet's checksum is the
// template's sum plus its fields' words (RFC 1624), not a sum over its bytes.
// With setWindow it gives each packet its length; else the pool did
// (packet.SizedAllocator).
func (g *generator) fillFast(hs []packet.Handle, now int64, setWindow bool) uint64 {
	per := g.perFlow
	n, fields, pl, cs := len(per[0].data), per[0].fields, per[0].payload, per[0].l4+6
	nowSum := uint64(wordSum(0, uint64(now)))
	mine, nf, seqs := g.mine, g.nextF, g.seq[:len(per)]
	tag, mask := g.seqTag, g.seqMask
	if !fields {
		pl, cs = 0, 0 // unused
	}
	if uint(pl) > 64-GenFieldsLen || uint(cs) > 64-2 {
		// Never (a frame of at most 64 bytes holds its fields and checksum):
		// this tells the compiler so, and the loop checks no bounds for them.
		for _, h := range hs {
			g.fill(h.P(), now)
		}
		return uint64(n) * uint64(len(hs))
	}
	for _, h := range hs {
		p := h.P()
		f := mine[nf]
		if nf++; nf == len(mine) {
			nf = 0
		}
		t := &per[f]
		d := (*[64]byte)(p.DataTail()[:64])
		copy64(d[:], t.small)
		if setWindow {
			p.SetWindow(p.Offset(), n)
		}
		p.SetFlag(packet.FlagLocal)
		p.RxTime = now
		if !fields {
			continue // the template is the whole frame, checksum included
		}
		seq := seqs[f]
		seqs[f] = seq + 1
		sq := seq & mask
		v := uint64(f)<<48 | tag | sq
		fl := d[pl : pl+GenFieldsLen]
		binary.BigEndian.PutUint64(fl[0:], v)
		binary.BigEndian.PutUint64(fl[8:], uint64(now))
		// The flow's fixed words, the timestamp's and the sequence number's
		// (at most 48 bits: three words), summed at once and folded at the end: the
		// same ones'-complement sum as combining them a pair at a time.
		s := uint64(t.fixedSum) + nowSum + sq>>32 + sq>>16&0xffff + sq&0xffff
		s = s>>16 + s&0xffff
		c := ^uint16(s + s>>16)
		if c == 0 {
			c = 0xFFFF // RFC 768: a computed zero is sent as all ones
		}
		binary.BigEndian.PutUint16(d[cs:cs+2], c)
	}
	g.nextF = nf
	return uint64(n) * uint64(len(hs))
}

// fill writes one packet from the next template and flow.
func (g *generator) fill(p *packet.Packet, now int64) int {
	// Round-robin over sizes, then flows; counters, not divisions.
	ti, fi := g.nextT, g.mine[g.nextF]
	if g.nextT++; g.nextT == len(g.tmpl) {
		g.nextT = 0
		if g.nextF++; g.nextF == len(g.mine) {
			g.nextF = 0
		}
	}
	var t *template
	var sum uint16
	if g.perFlow != nil {
		t = &g.perFlow[fi*len(g.tmpl)+ti]
		sum = t.udpSum
	} else {
		t = &g.tmpl[ti]
		sum = packet.ChecksumCombine(t.udpSum, g.flows[fi].udpAdj)
	}
	d, _ := p.Append(len(t.data))
	if t.small != nil && p.Tailroom() >= 64-len(d) {
		// The 64-byte copy runs into the tailroom, which holds nothing.
		copy64(p.DataTail()[:64], t.small)
	} else {
		copy(d, t.data)
	}
	p.SetFlag(packet.FlagLocal)
	p.RxTime = now
	if g.perFlow == nil {
		g.patchFlow(d, t, &g.flows[fi])
	}
	if t.fields {
		seq := g.seq[fi]
		g.seq[fi]++
		pl := d[t.payload : t.payload+GenFieldsLen]
		v := uint64(fi)<<48 | g.seqTag | seq&g.seqMask
		binary.BigEndian.PutUint64(pl[0:], v)
		binary.BigEndian.PutUint64(pl[8:], uint64(now))
		sum = packet.ChecksumCombine(sum, wordSum(v, uint64(now)))
	}
	if g.csum {
		c := ^sum
		if c == 0 {
			c = 0xFFFF // RFC 768: a computed zero is sent as all ones
		}
		binary.BigEndian.PutUint16(d[t.l4+6:], c)
	}
	return len(d)
}

// copy64 writes the 64 bytes of w into d.
func copy64(d []byte, w *[8]uint64) {
	_ = d[63]
	binary.LittleEndian.PutUint64(d[0:], w[0])
	binary.LittleEndian.PutUint64(d[8:], w[1])
	binary.LittleEndian.PutUint64(d[16:], w[2])
	binary.LittleEndian.PutUint64(d[24:], w[3])
	binary.LittleEndian.PutUint64(d[32:], w[4])
	binary.LittleEndian.PutUint64(d[40:], w[5])
	binary.LittleEndian.PutUint64(d[48:], w[6])
	binary.LittleEndian.PutUint64(d[56:], w[7])
}

// wordSum is the ones'-complement sum of the big-endian 16-bit words of two
// 64-bit fields: what the generator fields add to the UDP checksum.
func wordSum(a, b uint64) uint16 {
	s := a>>48 + a>>32&0xffff + a>>16&0xffff + a&0xffff + b>>48 + b>>32&0xffff + b>>16&0xffff + b&0xffff
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// Process lets packets from earlier stages pass.
func (g *generator) Process(ctx *plugins.Context, b *packet.Burst) {}

// Done: the count is sent or the duration is over.
func (g *generator) Done() bool { return g.done.Load() }

// Sent is how many packets this instance made.
func (g *generator) Sent() uint64 { return g.sent }
