package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// Bench holds the reflector's benchmark programs (bench.c): each run
// restores the request from a map first, since prog.Run's repeat runs a
// program on what the last run left. Restore does only that, Reflect then
// reflects, MacSwap then swaps the MACs and sends back: the baseline.
type Bench struct {
	Restore, Reflect, MacSwap *ebpf.Program
	Reflector                 *Reflector // the reflector maps Reflect uses
	objs                      benchObjects
}

// BenchFrameLen is the request the programs restore: Ethernet, IPv6, UDP
// and the base test packet.
const BenchFrameLen = 106

// LoadBench loads the benchmark programs with frame as the request.
func LoadBench(frame []byte) (*Bench, error) {
	if len(frame) != BenchFrameLen {
		return nil, fmt.Errorf("a benchmark frame of %d bytes, want %d", len(frame), BenchFrameLen)
	}
	b := &Bench{}
	if err := loadBenchObjects(&b.objs, nil); err != nil {
		return nil, fmt.Errorf("load the benchmark programs: %w", err)
	}
	b.Restore, b.Reflect, b.MacSwap = b.objs.BenchRestore, b.objs.BenchReflect, b.objs.BenchMacswap
	m := b.objs.benchMaps
	b.Reflector = &Reflector{maps: &reflectorPlainMaps{StampRfAddrs: m.StampRfAddrs, StampRfAllow: m.StampRfAllow,
		StampRfConfig: m.StampRfConfig, StampRfCounters: m.StampRfCounters, StampRfLimit: m.StampRfLimit,
		StampRfSessions: m.StampRfSessions, StampRfSrhs: m.StampRfSrhs}}
	if err := m.BenchFrame.Put(uint32(0), frame); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Close releases the programs and maps.
func (b *Bench) Close() error { return b.objs.Close() }
