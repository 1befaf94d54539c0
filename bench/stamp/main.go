// Command stamp is `make bench-stamp`: what STAMP costs a linerate core when
// its traffic mixes data packets with 0, 1, 10 and 100% STAMP test packets,
// for the Session-Reflector and for the Collector, as the seed paper's
// Figs. 15–16 measure for its implementations.
//
// Each run is one lcore, stepped on one locked goroutine (Options.Manual), with
// two pipelines on it joined by an in-memory wire:
//
//	tg:  bench.replay → forward m0  ~~mem~~  sut: m1 → [stamp stage] → forward null0
//
// bench.replay, registered by this program, stands for the seed's traffic
// generator: it copies prebuilt frames into buffers in a fixed pattern (a
// data frame, or a STAMP one f% of the time), flat out. Data frames are IPv6
// UDP of the given size; STAMP frames come over a 3-segment SRv6 path: test
// packets for the reflector, reflected packets (each with its own sequence
// number) for the collector. The SUT pipeline forwards data to a null port;
// the reflector reflects STAMP frames to it, the collector consumes them.
//
// The time is the lcore thread's CPU time (so a shared machine's other load
// does not count). "tg" is the generator alone (replay → null): the SUT's
// cost per packet is the rest, and its throughput is one core's worth of it.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"text/tabwriter"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stamp"

	_ "github.com/linerate/linerate/ports/mem"
)

var (
	sender    = netip.MustParseAddr("2001:db8:a::2")
	reflector = netip.MustParseAddr("2001:db8:b::2")
	sids      = []netip.Addr{netip.MustParseAddr("2001:db8:e::1"), netip.MustParseAddr("2001:db8:e::2")}
)

func main() {
	count := flag.Int("count", 2_000_000, "packets per run")
	runs := flag.Int("runs", 3, "runs per case; the median is printed")
	size := flag.Int("size", 128, "data frame size in bytes (without FCS)")
	flag.Parse()
	runtime.LockOSThread()
	plugins.Register(plugins.Kind{Name: "bench.replay", Summary: "bench-stamp's traffic generator", New: newReplay})

	fmt.Printf("bench-stamp: one lcore (thread CPU time), %d packets a run, median of %d; data frames %d B, STAMP over a 3-segment SRH; %d CPUs\n\n",
		*count, *runs, *size, runtime.NumCPU())
	tgNs, err := median(*runs, func() (float64, error) { return run("tg", "", 0, *count, *size) })
	if err != nil {
		fail(err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "role\tSTAMP\tlcore ns/pkt\tSUT ns/pkt\tSUT Mpps/core\tadded ns/pkt\t")
	fmt.Fprintf(tw, "tg\t-\t%.1f\t-\t-\t-\t\n", tgNs)
	for _, role := range []string{"reflector", "collector"} {
		base, err := median(*runs, func() (float64, error) { return run(role, "none", 0, *count, *size) })
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(tw, "%s\tno stage\t%.1f\t%.1f\t%.2f\t(data only)\t\n", role, base, base-tgNs, 1e3/(base-tgNs))
		for _, pct := range []int{0, 1, 10, 100} {
			ns, err := median(*runs, func() (float64, error) { return run(role, "stage", pct, *count, *size) })
			if err != nil {
				fail(err)
			}
			sut := ns - tgNs
			fmt.Fprintf(tw, "%s\t%d%%\t%.1f\t%.1f\t%.2f\t%+.1f\t\n", role, pct, ns, sut, 1e3/sut, ns-base)
		}
	}
	tw.Flush()
	fmt.Println(`
"added ns/pkt": what the STAMP stage costs on average over the mix, against
the same SUT forwarding the data alone (no stage). The seed's eBPF implementation (its Figs. 14–16, XDP on a 2.4 GHz
Xeon): collector 1.02 Mpps at 0%, 3.0 Mpps at 100%; reflector 2.18 Mpps at
100%; its Scapy implementations 35–86 kpps.`)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "bench-stamp: %v\n", err)
	os.Exit(1)
}

func median(n int, f func() (float64, error)) (float64, error) {
	var xs []float64
	for range max(n, 1) {
		x, err := f()
		if err != nil {
			return 0, err
		}
		xs = append(xs, x)
	}
	sort.Float64s(xs)
	return xs[len(xs)/2], nil
}

// run builds the engine for a case, replays count packets through it and
// returns the lcore's CPU ns per packet. role "tg" is the generator alone;
// mode "none" is the SUT without its STAMP stage.
func run(role, mode string, pct, count, size int) (float64, error) {
	frames, stampIdx, err := buildFrames(role, pct, size)
	if err != nil {
		return 0, err
	}
	replays.Store(&replaySpec{frames: frames, stamp: stampIdx, count: count, seqOff: seqOffset(role, frames, stampIdx)})
	cfg := configFor(role, mode)
	c, err := config.Parse("bench-stamp.toml", []byte(cfg))
	if err != nil {
		return 0, err
	}
	e, err := appliance.New(c, appliance.Options{Manual: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return 0, err
	}
	defer e.Close()
	if err := e.Start(); err != nil {
		return 0, err
	}
	var st *replay
	for _, s := range e.Stages("replay") {
		st = s.(*replay)
	}
	t0 := cputime.Thread()
	for !st.Done() {
		e.Step()
	}
	for i := 0; i < 4; i++ { // what is still on the wire
		e.Step()
	}
	t := cputime.Thread() - t0
	snap := e.Snapshot()
	var drops uint64
	for _, d := range snap.Drops {
		drops += d.Count
	}
	if drops != 0 {
		return 0, fmt.Errorf("%s %s %d%%: %d drops: %+v", role, mode, pct, drops, snap.Drops)
	}
	return float64(t) / float64(count), nil
}

const head = `
version = 1
[engine]
pin = false
poll = "busy"
[control]
listen = ""
[[pools]]
name = "default"
buffers = 16384
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[ports]]
name = "null0"
driver = "null"
`

func configFor(role, mode string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("[[pipelines]]\nname = \"tg\"\nlcores = [0]\n")
	if role == "collector" {
		// The sessions the replies belong to; never started.
		fmt.Fprintf(&b, `[[pipelines.stages]]
kind = "stamp.sender"
src = %q
[[pipelines.stages.sessions]]
ssid = 7
reflector = %q
segments = [%q, %q]
reflector_mode = "stateful"
start = false
`, sender, reflector, sids[0], sids[1])
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"bench.replay\"\nname = \"replay\"\n")
	if role == "tg" {
		b.WriteString("[[pipelines.stages]]\nkind = \"forward\"\nport = \"null0\"\n")
		return b.String()
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"forward\"\nport = \"m0\"\n")
	b.WriteString("[[pipelines]]\nname = \"sut\"\nlcores = [0]\nrx = [\"m1\"]\n")
	if mode == "stage" {
		switch role {
		case "reflector":
			fmt.Fprintf(&b, `[[pipelines.stages]]
kind = "stamp.reflector"
rate_limit = "0"          # one source sends everything: no per-source limit
[[pipelines.stages.sessions]]
ssid = 7
mode = "stateful"
return_path = [%q, %q]
`, sids[1], sids[0])
		case "collector":
			b.WriteString("[[pipelines.stages]]\nkind = \"stamp.collector\"\n")
		}
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"forward\"\nport = \"null0\"\n")
	return b.String()
}

// frame builds Ethernet, IPv6 (with an SRH over segs, all done: the frame as
// it arrives at its final destination) and UDP around payload.
func frame(src, dst netip.Addr, segs []netip.Addr, sport, dport uint16, payload []byte) ([]byte, error) {
	var srh []byte
	if len(segs) > 0 {
		f := packet.SRHFields{NextHeader: packet.ProtocolUDP}
		path := append(append([]netip.Addr(nil), segs...), dst)
		for i := len(path) - 1; i >= 0; i-- {
			f.Segments = append(f.Segments, path[i].As16())
		}
		srh = make([]byte, f.Len())
		if _, err := packet.PutSRH(srh, &f); err != nil {
			return nil, err
		}
	}
	udpLen := packet.UDPLen + len(payload)
	d := make([]byte, 14+40+len(srh)+udpLen)
	copy(d[0:6], []byte{2, 0, 0, 0, 0, 0xb})
	copy(d[6:12], []byte{2, 0, 0, 0, 0, 0xa})
	binary.BigEndian.PutUint16(d[12:], packet.EtherTypeIPv6)
	ip := packet.IPv6(d[14:54])
	d[14] = 0x60
	ip.SetPayloadLength(uint16(len(srh) + udpLen))
	ip.SetNextHeader(packet.ProtocolUDP)
	if srh != nil {
		ip.SetNextHeader(packet.ProtocolRouting)
	}
	ip.SetHopLimit(60)
	ip.SetSrc(src.As16())
	ip.SetDst(dst.As16())
	copy(d[54:], srh)
	u := packet.UDP(d[54+len(srh):])
	u.SetSrcPort(sport)
	u.SetDstPort(dport)
	u.SetLength(uint16(udpLen))
	copy(u[packet.UDPLen:], payload)
	u.SetChecksum(u.ChecksumIPv6(src.As16(), dst.As16()))
	return d, nil
}

// buildFrames makes a pattern of 100 frames with pct STAMP ones spread
// evenly, and says which are STAMP.
func buildFrames(role string, pct, size int) ([][]byte, []bool, error) {
	data, err := frame(sender, netip.MustParseAddr("2001:db8:99::1"), nil, 10000, 20000, make([]byte, max(size-62, 16)))
	if err != nil {
		return nil, nil, err
	}
	var st []byte
	ee := stamp.MakeErrorEstimate(true, false, 0, 1)
	switch role {
	case "reflector":
		f := stamp.SenderFields{Seq: 1, Timestamp: 1 << 40, ErrorEstimate: ee, SSID: 7}
		p := make([]byte, f.Len())
		if _, err := stamp.EncodeSender(p, &f); err != nil {
			return nil, nil, err
		}
		st, err = frame(sender, reflector, sids, stamp.DefaultPort, stamp.DefaultPort, p)
	case "collector":
		f := stamp.ReflectorFields{Seq: 1, Timestamp: 1<<40 + 2000, ErrorEstimate: ee, SSID: 7, ReceiveTimestamp: 1<<40 + 1000,
			SenderSeq: 1, SenderTimestamp: 1 << 40, SenderErrorEstimate: ee, SenderTTL: 62}
		p := make([]byte, f.Len())
		if _, err := stamp.EncodeReflector(p, &f); err != nil {
			return nil, nil, err
		}
		st, err = frame(reflector, sender, []netip.Addr{sids[1], sids[0]}, stamp.DefaultPort, stamp.DefaultPort, p)
	}
	if err != nil {
		return nil, nil, err
	}
	var frames [][]byte
	var isStamp []bool
	acc := 0
	for i := 0; i < 100; i++ {
		acc += pct
		if acc >= 100 && st != nil {
			acc -= 100
			frames, isStamp = append(frames, st), append(isStamp, true)
			continue
		}
		frames, isStamp = append(frames, data), append(isStamp, false)
	}
	return frames, isStamp, nil
}

// seqOffset is where a collector's frames carry the sender sequence number,
// which the replay makes distinct per packet; -1 for the others.
func seqOffset(role string, frames [][]byte, isStamp []bool) int {
	if role != "collector" {
		return -1
	}
	for i, f := range frames {
		if isStamp[i] {
			var l packet.Layers
			if packet.Parse(f, &l) == nil {
				return int(l.L4) + packet.UDPLen + 24
			}
		}
	}
	return -1
}

type replaySpec struct {
	frames [][]byte
	stamp  []bool
	count  int
	seqOff int
}

// replays hands the next run's frames to its replay stage.
var replays atomic.Pointer[replaySpec]

// replay is the bench.replay stage: a Producer of the spec's frames.
type replay struct {
	spec *replaySpec
	pool packet.Pool
	next int
	sent int
	seq  uint32
	done atomic.Bool
}

func newReplay(s *plugins.Setup) (plugins.Stage, error) {
	if err := s.Config.Decode(&struct{}{}); err != nil {
		return nil, err
	}
	pool, err := s.Pool("default", 0, 0)
	if err != nil {
		return nil, err
	}
	return &replay{spec: replays.Load(), pool: pool}, nil
}

func (r *replay) Process(ctx *plugins.Context, b *packet.Burst) {}

func (r *replay) Done() bool { return r.done.Load() }

func (r *replay) Produce(ctx *plugins.Context, b *packet.Burst) {
	n := min(b.Room(), r.spec.count-r.sent)
	if n <= 0 {
		r.done.Store(true)
		return
	}
	start := b.N
	got := r.pool.Alloc(b, n)
	for i := start; i < b.N; i++ {
		f := r.spec.frames[r.next]
		p := b.H[i].P()
		d, _ := p.Append(len(f))
		copy(d, f)
		if r.spec.stamp[r.next] && r.spec.seqOff >= 0 {
			// A sequence number of its own, the checksum kept right
			// (RFC 1624).
			u := d[r.spec.seqOff-24-packet.UDPLen:]
			old := binary.BigEndian.Uint32(d[r.spec.seqOff:])
			binary.BigEndian.PutUint32(d[r.spec.seqOff:], r.seq)
			cs := packet.ChecksumUpdate32(binary.BigEndian.Uint16(u[6:]), old, r.seq)
			binary.BigEndian.PutUint16(u[6:], cs)
			r.seq++
		}
		p.RxTime = ctx.Now
		r.next++
		if r.next == len(r.spec.frames) {
			r.next = 0
		}
	}
	r.sent += got
}
