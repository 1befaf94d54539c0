package sdk

import (
	"log/slog"
	"testing"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

type passStage struct{}

func (passStage) Process(_ *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		b.H[i].P().Continue()
	}
}

// BenchmarkBurst is the plugin's side of a stage out of process, against the
// same stage in process, in one run: bursts of 64 packets of 64 bytes, given
// Continue by a pass-through stage, called directly on packets of a pool
// (baseline), or read from the C2S ring as linerate lends them, run, and
// answered on the S2C ring, as the plugin's thread does (with linerate's
// side reduced to writing the descriptors). Both report packets/s.
func BenchmarkBurst(b *testing.B) {
	const bufSize = 2368
	data, err := memif.NewRegion("bench-data", packet.MaxBurst*bufSize)
	if err != nil {
		b.Fatal(err)
	}
	defer data.Close()
	rings, err := memif.NewRegion("bench-rings", 2*memif.RingBytes(10))
	if err != nil {
		b.Fatal(err)
	}
	defer rings.Close()
	b.Run("in-process", func(b *testing.B) {
		pool, err := packet.NewSlab(packet.SlabConfig{Name: "bench-burst", Buffers: packet.MaxBurst})
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		var bu packet.Burst
		pool.Alloc(&bu, packet.MaxBurst)
		for _, h := range bu.Handles() {
			h.P().Append(60)
		}
		ctx := &plugins.Context{}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			passStage{}.Process(ctx, &bu)
		}
		b.ReportMetric(float64(b.N*packet.MaxBurst)/b.Elapsed().Seconds(), "packets/s")
		pool.Free(&bu)
	})
	b.Run("lent", func(b *testing.B) {
		in, err := newInstance(0, passStage{}, &stats.Set{}, &lentPool{}, clock.NewSystem(), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		rx := memif.ViewRing(rings.Mem, 10)
		tx := memif.ViewRing(rings.Mem[memif.RingBytes(10):], 10)
		c := &memif.Conn{Regions: []*memif.Region{data}}
		in.spans = spansOf(c.Regions)
		ctx := &plugins.Context{Env: &in.env}
		var bu packet.Burst
		var slot uint16
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for k := 0; k < packet.MaxBurst; k++ {
				*rx.D(slot + uint16(k)) = memif.Desc{Offset: uint32(k*bufSize + 320), Length: 60, Metadata: memif.ExtRooms(320, bufSize-380)}
			}
			in.burst(ctx, c, rx, tx, slot, packet.MaxBurst, &bu)
			slot += packet.MaxBurst
		}
		b.ReportMetric(float64(b.N*packet.MaxBurst)/b.Elapsed().Seconds(), "packets/s")
		if d := tx.Load(slot - 1); d.Length != 60 || d.Metadata != memif.ExtContinue {
			b.Fatalf("the last result: %+v", d)
		}
	})
}
