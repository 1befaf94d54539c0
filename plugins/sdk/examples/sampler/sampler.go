package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/sdk"
)

// snapLen is how much of a sampled packet the export keeps.
const snapLen = 256

// slots bounds the export queue: a sample that finds it full is counted and
// not exported, so a slow disk never slows the stage.
const slots = 1024

type sampler struct {
	every   uint64
	n       uint64
	sampled *stats.Counter
	lost    *stats.Counter
	clk     clock.Clock
	exp     *exporter
}

func newSampler(s *plugins.Setup) (plugins.Stage, error) {
	var c struct {
		Every  uint64 `toml:"every"`  // sample one packet in every
		Export string `toml:"export"` // a pcap file for the samples; none when empty
	}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if c.Every == 0 {
		return nil, fmt.Errorf("%s: every: one packet in how many? (at least 1)", s.Config.Where())
	}
	st := &sampler{every: c.Every, clk: s.Clock,
		sampled: s.Counters.New("sampled", "packets marked and sampled"),
		lost:    s.Counters.New("export_lost", "samples not exported: the export queue was full")}
	if c.Export != "" {
		// One file for every instance.
		e := s.Shared("export", func() any {
			e, err := newExporter(c.Export)
			if err != nil {
				return err
			}
			return e
		})
		if err, ok := e.(error); ok {
			return nil, fmt.Errorf("%s: export: %w", s.Config.Where(), err)
		}
		st.exp = e.(*exporter)
	}
	return st, nil
}

// Process marks every Nth packet and queues a copy of its head for export.
// Every packet continues.
func (s *sampler) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		s.n++
		if s.n%s.every != 0 {
			continue
		}
		h := b.H[i]
		sdk.Mark(ctx, h)
		s.sampled.Inc()
		if s.exp != nil && !s.exp.put(h.P().Data(), clock.Unix(s.clk, ctx.Now)) {
			s.lost.Inc()
		}
	}
}

// exporter writes samples to a pcap file from a goroutine of its own.
type exporter struct {
	f    *os.File
	mu   sync.Mutex
	free chan int
	full chan int
	buf  [slots][snapLen]byte
	meta [slots]struct {
		len, orig int
		ts        int64
	}
	count atomic.Uint64
}

func newExporter(path string) (*exporter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	var hdr [24]byte
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], snapLen)
	binary.LittleEndian.PutUint32(hdr[20:], 1) // Ethernet
	if _, err := f.Write(hdr[:]); err != nil {
		f.Close()
		return nil, err
	}
	e := &exporter{f: f, free: make(chan int, slots), full: make(chan int, slots)}
	for i := 0; i < slots; i++ {
		e.free <- i
	}
	go e.write()
	return e, nil
}

// put queues a sample; false when the queue is full. It does not allocate.
func (e *exporter) put(data []byte, unixNs int64) bool {
	select {
	case i := <-e.free:
		n := copy(e.buf[i][:], data)
		e.meta[i].len, e.meta[i].orig, e.meta[i].ts = n, len(data), unixNs
		e.full <- i
		return true
	default:
		return false
	}
}

func (e *exporter) write() {
	var rec [16]byte
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case i := <-e.full:
			m := e.meta[i]
			binary.LittleEndian.PutUint32(rec[0:], uint32(m.ts/1e9))
			binary.LittleEndian.PutUint32(rec[4:], uint32(m.ts%1e9/1e3))
			binary.LittleEndian.PutUint32(rec[8:], uint32(m.len))
			binary.LittleEndian.PutUint32(rec[12:], uint32(m.orig))
			e.mu.Lock()
			_, _ = e.f.Write(rec[:])
			_, _ = e.f.Write(e.buf[i][:m.len])
			e.mu.Unlock()
			e.count.Add(1)
			e.free <- i
		case <-t.C:
			e.mu.Lock()
			_ = e.f.Sync()
			e.mu.Unlock()
		}
	}
}
