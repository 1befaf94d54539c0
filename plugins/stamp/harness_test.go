package stamp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// The harness runs STAMP stages without the engine (plugins/stagetest),
// in virtual time, on one pool; the stages it builds share one registry (the
// engine's Global).
type harness struct {
	*stagetest.Harness
	pool *packet.Slab
}

// testUnixBase is the harness clock's wall time at virtual zero: 2024-01-01.
const testUnixBase = 1704067200 * 1e9

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{Harness: stagetest.NewHarness(t, testUnixBase)}
	h.pool = h.NewPool("default", 4096, 2048)
	h.Ports = stagetest.Ports{
		{ID: 0, Name: "eth0", MTU: 1500, Pool: h.pool, MAC: [6]byte{2, 0, 0, 0, 0, 0xa0}},
		{ID: 1, Name: "eth1", MTU: 1500, Pool: h.pool, MAC: [6]byte{2, 0, 0, 0, 0, 0xa1}},
	}
	h.Clock.Set(int64(time.Second))
	return h
}

func (h *harness) registry() *Registry { return h.Globals["stamp"].(*Registry) }

// result is what became of one packet.
type result struct {
	data    []byte // bytes when it left the chain (forwarded or continued)
	dropped string
	port    uint16 // forwarded to; packet.NoPort when it continued
	rxTime  int64
}

// runBurst passes a burst through stages, applying verdicts, and returns each
// packet's fate in order, freeing them all.
func (h *harness) runBurst(b *packet.Burst, stages ...plugins.Stage) []result {
	h.T.Helper()
	o := h.Run(b, stages...)
	out := make([]result, len(o.Fates))
	for i, f := range o.Fates {
		r := &out[i]
		if f.Verdict != packet.Drop && f.Verdict != packet.Consume {
			r.port, r.rxTime = f.Port, f.H.P().RxTime
			if f.Verdict == packet.Continue {
				r.port = packet.NoPort
			}
		}
		r.data, r.dropped = f.Take()
	}
	return out
}

// run passes one frame through stages.
func (h *harness) run(data []byte, in uint16, stages ...plugins.Stage) result {
	h.T.Helper()
	b := &packet.Burst{}
	b.Push(h.Pkt(data, in))
	return h.runBurst(b, stages...)[0]
}

// produce runs a Producer once and returns copies of what it made (freed).
func (h *harness) produce(st plugins.Stage) [][]byte {
	h.T.Helper()
	b := h.Produce(st)
	var out [][]byte
	for _, hd := range b.Handles() {
		out = append(out, stagetest.TakeData(hd))
	}
	return out
}

// advance moves virtual time.
func (h *harness) advance(d time.Duration) { h.Clock.Advance(d) }

var (
	addrS = netip.MustParseAddr("2001:db8:a::2") // sender
	addrR = netip.MustParseAddr("2001:db8:b::2") // reflector
	addrE = netip.MustParseAddr("2001:db8:e::1") // an SRv6 End SID between them
)
