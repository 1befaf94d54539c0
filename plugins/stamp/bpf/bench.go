package bpf

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/offload"
)

// Bench holds the reflector's benchmark programs (bench.c): each run
// restores the request from a map first, since prog.Run's repeat runs a
// program on what the last run left. Restore does only that, Reflect then
// reflects, MacSwap then swaps the MACs and sends back: the baseline.
// MacSwapClock2 is MacSwap with the reflector's two clock reads (T2 first,
// T3 last); MacSwapBare swaps without restoring (twice is the request again).
type Bench struct {
	Restore, Reflect, MacSwap  *ebpf.Program
	MacSwapClock2, MacSwapBare *ebpf.Program
	Reflector                  *Reflector // the reflector maps Reflect uses
	// Costs are the parts' programs by name (bench.c): each restores, does
	// its part, and sends the frame back. A name ending in _x8 does it 8
	// times.
	Costs []Cost
	// RingBuf reserves and submits a record of 64 bytes in Ring: run it at
	// most 10000 times between drains.
	RingBuf *ebpf.Program
	Ring    *ebpf.Map
	objs    benchObjects
}

// Cost is one part's program.
type Cost struct {
	Name string
	Prog *ebpf.Program
}

// BenchFrameLen is the request the programs restore: Ethernet, IPv6, UDP
// and the base test packet.
const BenchFrameLen = 106

// BenchNeeds is what LoadBench needs of the kernel: every program's needs.
func BenchNeeds(int) ([]kernel.Feature, error) {
	spec, err := loadBench()
	if err != nil {
		return nil, err
	}
	var out []kernel.Feature
	for name := range spec.Programs {
		for _, f := range (offload.Program{Spec: spec, Slot: name}).Needs() {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// LoadBench loads the benchmark programs with frame as the request.
func LoadBench(frame []byte) (*Bench, error) {
	if len(frame) != BenchFrameLen {
		return nil, fmt.Errorf("a benchmark frame of %d bytes, want %d", len(frame), BenchFrameLen)
	}
	b := &Bench{}
	if err := loadBenchObjects(&b.objs, nil); err != nil {
		return nil, fmt.Errorf("load the benchmark programs: %w", err)
	}
	p := &b.objs.benchPrograms
	b.Restore, b.Reflect, b.MacSwap = p.BenchRestore, p.BenchReflect, p.BenchMacswap
	b.MacSwapClock2, b.MacSwapBare = p.BenchMacswapClock2, p.BenchMacswapBare
	b.RingBuf = p.BenchCostRingbuf
	b.Costs = []Cost{
		{"ktime_get_ns_x8", p.BenchCostKtimeNsX8}, {"ktime_get_tai_ns_x8", p.BenchCostKtimeTaiX8},
		{"ktime_get_boot_ns_x8", p.BenchCostKtimeBootX8}, {"ktime_get_coarse_ns_x8", p.BenchCostKtimeCoarseX8},
		{"jiffies64_x8", p.BenchCostJiffiesX8},
		{"array_lookup_x8", p.BenchCostArrayX8}, {"percpu_count_x8", p.BenchCostPercpuX8},
		{"atomic_add_x8", p.BenchCostAtomicX8}, {"hash_lookup_x8", p.BenchCostHashX8},
		{"lpm_lookup_x8", p.BenchCostLpmX8},
		{"udp_csum_bytes", p.BenchCostCsumBytes}, {"udp_csum_words", p.BenchCostCsumWords},
		{"udp_csum_rfc1624", p.BenchCostCsumIncr},
		{"payload_writes_bytes", p.BenchCostWritesBytes}, {"payload_writes_words", p.BenchCostWritesWords},
		{"div_1e9_x8", p.BenchCostDivX8},
	}
	b.Ring = b.objs.BenchRing
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
