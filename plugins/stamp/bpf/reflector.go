package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/offload"
	"golang.org/x/sys/unix"
)

// MaxReturnSegments is how many segments a return SRH the program writes
// holds, the sender's slot included (reflector.c: RF_MAX_SEGS). A session
// with a longer return path stays in Go.
const MaxReturnSegments = 8

// ReflectorConfig is the stage's config, as the program reads it.
type ReflectorConfig struct {
	Port       uint16
	HopLimit   uint8
	SwapMAC    bool
	ReflectAll bool // unknown SSIDs: reflect statelessly
	Format     int8 // 0 NTP, 1 PTP, -1 the sender's
	// ErrorEstimates by format, and the offsets from CLOCK_TAI to Unix time
	// (for NTP) and to PTP time: what user space learns from adjtimex.
	ErrorEstimates [2]uint16
	UTCOffset      int64   // Unix ns − CLOCK_TAI ns
	PTPOffset      int64   // PTP (TAI) ns − CLOCK_TAI ns
	RateLimit      float64 // per source, packets a second; 0: none
	RateBurst      int
	Broadcasts     [][4]byte
	Addresses      []netip.Addr   // ours; none: any
	Allow          []netip.Prefix // sources answered; none: any
}

// ReflectorSession is a session as the program reads it.
type ReflectorSession struct {
	SSID                      uint16
	Stateful, Running, Auth   bool
	Pinned                    bool
	Format                    int8 // 0 NTP, 1 PTP, -1 the sender's
	Sender, Source, ReturnEnd [16]byte
	HasSource                 bool
	SRH, SRHLast              []byte // the return SRHs, with and without the sender's slot
	goOnly                    bool
}

// SessionState is what the program keeps per session.
type SessionState struct {
	Seq     uint32
	Replied uint64
}

// ReflectorCounters are the program's counters, in the order of its
// per-CPU array: "reflected" and "to_go" (packets left to the Go stage),
// then drop reasons, by the names the Go stage registers.
var ReflectorCounters = []string{
	"reflected", "to_go",
	"stamp_short", "stamp_bad_source", "stamp_group_destination", "stamp_not_allowed",
	"stamp_unknown_session", "stamp_wrong_source", "stamp_rate_limited",
	"stamp_reply_too_big", "stamp_bad_return_path",
}

// ReflectorSpec is the program's collection, for a port that links its
// slot (ReflectorSlot) into its dispatcher.
func ReflectorSpec() (*ebpf.CollectionSpec, error) { return loadReflectorPlain() }

// ReflectorSlot names the slot function in ReflectorSpec.
const ReflectorSlot = "stamp_reflector_slot"

// ReflectorNeeds is what LoadReflector(ifindex) needs of the kernel: the
// device-bound variant (ifindex ≠ 0) calls the rx-timestamp kfunc too.
func ReflectorNeeds(ifindex int) ([]kernel.Feature, error) {
	load := loadReflectorPlain
	if ifindex != 0 {
		load = loadReflectorDev
	}
	return needs(load, "stamp_reflector_xdp")
}

// needs are the kernel features program prog of load's collection needs.
func needs(load func() (*ebpf.CollectionSpec, error), prog string) ([]kernel.Feature, error) {
	spec, err := load()
	if err != nil {
		return nil, err
	}
	return offload.Program{Spec: spec, Slot: prog}.Needs(), nil
}

// Reflector is the reflector program's maps, and the program when it was
// loaded on its own (LoadReflector).
type Reflector struct {
	// Program is the whole-frame XDP program (what the slot does, with
	// "next" and "up to Go" as XDP_PASS): for prog.Run, or attached alone.
	Program *ebpf.Program
	objs    reflectorPlainObjects // the two variants have the same maps
	dev     reflectorDevObjects
	maps    *reflectorPlainMaps
	ids     map[uint16]bool // the sessions put: the array has every SSID

	mmapOnce sync.Once
	mem      []byte // the sessions array, mapped (see Seq)
	memErr   error
}

// sessionSize is sizeof(struct rf_session): the sessions array's stride.
const sessionSize = 64

// The C struct and its Go twin have the stride Seq computes with.
var _ = [1]struct{}{}[unsafe.Sizeof(reflectorPlainRfSession{})-sessionSize]

// Seq is where the program keeps session id's sequence (stateful mode), in
// the sessions array mapped into this process: a Go stage that answers some
// of a session's packets numbers them from the same counter with
// atomic.AddUint32, as the program does with its atomic add. The memory is
// the kernel's, off the Go heap, and stays mapped until Close.
func (r *Reflector) Seq(id uint16) (*uint32, error) {
	r.mmapOnce.Do(func() {
		n := int(r.maps.StampRfSessions.MaxEntries()) * sessionSize
		r.mem, r.memErr = unix.Mmap(r.maps.StampRfSessions.FD(), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if r.memErr != nil {
			r.memErr = fmt.Errorf("map the XDP reflector's sessions: %w", r.memErr)
		}
	})
	if r.memErr != nil {
		return nil, r.memErr
	}
	return (*uint32)(unsafe.Pointer(&r.mem[int(id)*sessionSize+4])), nil
}

// ReflectorMaps wraps the maps of a linked slot, by their names in
// ReflectorSpec.
func ReflectorMaps(m map[string]*ebpf.Map) (*Reflector, error) {
	r := &Reflector{maps: &reflectorPlainMaps{}}
	for name, p := range map[string]**ebpf.Map{
		"stamp_rf_addrs": &r.maps.StampRfAddrs, "stamp_rf_allow": &r.maps.StampRfAllow,
		"stamp_rf_config": &r.maps.StampRfConfig, "stamp_rf_counters": &r.maps.StampRfCounters,
		"stamp_rf_limit": &r.maps.StampRfLimit, "stamp_rf_sessions": &r.maps.StampRfSessions,
		"stamp_rf_srhs": &r.maps.StampRfSrhs,
	} {
		if *p = m[name]; *p == nil {
			return nil, fmt.Errorf("the XDP reflector's map %s is missing", name)
		}
	}
	return r, nil
}

// LoadReflector loads the plain variant (ifindex 0, for prog.Run) or the
// device-bound one for the interface ifindex, which reads T2 from the
// driver's rx timestamp where it has one.
func LoadReflector(ifindex int) (*Reflector, error) {
	r := &Reflector{}
	if ifindex == 0 {
		if err := loadReflectorPlainObjects(&r.objs, nil); err != nil {
			return nil, fmt.Errorf("load the XDP reflector: %w", err)
		}
		r.Program, r.maps = r.objs.StampReflectorXdp, &r.objs.reflectorPlainMaps
		return r, nil
	}
	spec, err := loadReflectorDev()
	if err != nil {
		return nil, err
	}
	delete(spec.Programs, ReflectorSlot)
	offload.BindToDevice(spec, "stamp_reflector_xdp", ifindex)
	var objs struct {
		Prog *ebpf.Program `ebpf:"stamp_reflector_xdp"`
		reflectorDevMaps
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load the device-bound XDP reflector for ifindex %d: %w", ifindex, err)
	}
	r.dev.StampReflectorXdp, r.dev.reflectorDevMaps = objs.Prog, objs.reflectorDevMaps
	r.Program = objs.Prog
	r.maps = (*reflectorPlainMaps)(&r.dev.reflectorDevMaps)
	return r, nil
}

// Close releases what LoadReflector loaded; maps from ReflectorMaps are
// their owner's.
func (r *Reflector) Close() error {
	var err error
	if r.mem != nil {
		err = unix.Munmap(r.mem)
		r.mem = nil
	}
	return errors.Join(err, r.objs.Close(), r.dev.Close())
}

// Configure writes the config map, the addresses and the allowed prefixes.
func (r *Reflector) Configure(c ReflectorConfig) error {
	v := reflectorPlainRfConfig{Port: c.Port, HopLimit: c.HopLimit, Format: c.Format,
		Ee: c.ErrorEstimates, UtcOff: c.UTCOffset, PtpOff: c.PTPOffset}
	if c.SwapMAC {
		v.Flags |= rfSwapMAC
	}
	if c.ReflectAll {
		v.Flags |= rfReflectAll
	}
	if len(c.Addresses) > 0 {
		v.Flags |= rfAddrs
	}
	if len(c.Allow) > 0 {
		v.Flags |= rfAllow
	}
	if c.RateLimit > 0 {
		v.Flags |= rfLimit
		v.LimT = uint64(math.Ceil(1e9 / c.RateLimit))
		v.LimTau = uint64(max(c.RateBurst-1, 0)) * v.LimT
	}
	if len(c.Broadcasts) > len(v.Bcast) {
		return fmt.Errorf("%d broadcast addresses: the XDP reflector holds %d", len(c.Broadcasts), len(v.Bcast))
	}
	copy(v.Bcast[:], c.Broadcasts)
	v.N_bcast = uint8(len(c.Broadcasts))
	table, probes, err := addrTable(c.Addresses)
	if err != nil {
		return err
	}
	v.AddrProbes = uint8(probes)
	for k := range table {
		if err := r.maps.StampRfAddrs.Put(uint32(k), table[k]); err != nil {
			return fmt.Errorf("XDP reflector addresses: %w", err)
		}
	}
	if err := clearMap(r.maps.StampRfAllow); err != nil {
		return err
	}
	for _, p := range c.Allow {
		// The family's 8 bits, then the address (reflector.c: lpm_key).
		k := reflectorPlainLpmKey{Prefixlen: 8 + uint32(p.Bits()), Family: 6, Addr: as16(p.Addr())}
		if p.Addr().Is4() {
			k.Prefixlen += 96
			k.Family = 4
		}
		if err := r.maps.StampRfAllow.Put(k, uint8(1)); err != nil {
			return fmt.Errorf("XDP reflector allow: %w", err)
		}
	}
	return r.maps.StampRfConfig.Put(uint32(0), v)
}

// Config flags (reflector.c).
const (
	rfSwapMAC    = 1
	rfReflectAll = 2
	rfAddrs      = 4
	rfAllow      = 8
	rfLimit      = 16
)

// Session flags (reflector.c).
const (
	sStateful = 1
	sRunning  = 2
	sPinned   = 4
	sAuth     = 8
	sSource   = 16
	sExists   = 32
	sGo       = 64
)

// Offloadable reports whether the program can reflect a session's packets:
// its return SRHs fit.
func (s *ReflectorSession) Offloadable() bool {
	return len(s.SRH) <= 8+16*MaxReturnSegments && len(s.SRHLast) <= 8+16*MaxReturnSegments
}

// PutSession adds or changes a session, keeping the program's state of it
// (sequence and counts) when it exists.
// A session the program cannot answer (Offloadable false) is put as one
// whose packets it leaves to Go, so that it neither answers them as an
// unknown SSID nor drops them.
func (r *Reflector) PutSession(s ReflectorSession) error {
	if !s.Offloadable() {
		s = ReflectorSession{SSID: s.SSID, goOnly: true}
	}
	var v reflectorPlainRfSession
	if err := r.maps.StampRfSessions.Lookup(uint32(s.SSID), &v); err != nil {
		return err
	}
	if v.Flags&sExists == 0 {
		v = reflectorPlainRfSession{}
	}
	old := v
	v.Flags = sExists
	for _, f := range []struct {
		on   bool
		flag uint8
	}{{s.Stateful, sStateful}, {s.Running, sRunning}, {s.Pinned, sPinned}, {s.Auth, sAuth}, {s.HasSource, sSource},
		{s.goOnly, sGo}} {
		if f.on {
			v.Flags |= f.flag
		}
	}
	v.Format = s.Format
	v.Sender, v.Source, v.RetLast = s.Sender, s.Source, s.ReturnEnd
	var sr reflectorPlainRfSrh
	v.SrhLen, v.SrhLastLen = uint8(copy(sr.Srh[:], s.SRH)), uint8(copy(sr.SrhLast[:], s.SRHLast))
	if v.SrhLen > 0 {
		if err := r.maps.StampRfSrhs.Put(s.SSID, sr); err != nil {
			return err
		}
	}
	// An entry as it was is not written again: the sequence the program
	// moves is left alone. A change writes the whole entry back, and a
	// packet answered between the read and the write may see its sequence
	// number again.
	if v != old {
		if err := r.maps.StampRfSessions.Put(uint32(s.SSID), v); err != nil {
			return err
		}
	}
	if r.ids == nil {
		r.ids = map[uint16]bool{}
	}
	r.ids[s.SSID] = true
	return nil
}

// DeleteSession removes a session; a missing one is no error.
func (r *Reflector) DeleteSession(id uint16) error {
	if err := r.maps.StampRfSessions.Put(uint32(id), reflectorPlainRfSession{}); err != nil {
		return err
	}
	if err := r.maps.StampRfSrhs.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	delete(r.ids, id)
	return nil
}

// Sessions lists the SSIDs put in the program through r.
func (r *Reflector) Sessions() ([]uint16, error) {
	ids := make([]uint16, 0, len(r.ids))
	for id := range r.ids {
		ids = append(ids, id)
	}
	return ids, nil
}

// State reads a session's state in the program.
func (r *Reflector) State(id uint16) (SessionState, error) {
	var v reflectorPlainRfSession
	if err := r.maps.StampRfSessions.Lookup(uint32(id), &v); err != nil {
		return SessionState{}, err
	}
	if v.Flags&sExists == 0 {
		return SessionState{}, ebpf.ErrKeyNotExist
	}
	return SessionState{Seq: v.Seq, Replied: v.Replied}, nil
}

// Counters sums the per-CPU counters, in the order of ReflectorCounters.
func (r *Reflector) Counters() ([]uint64, error) {
	return sumPerCPU(r.maps.StampRfCounters, len(ReflectorCounters))
}

func sumPerCPU(m *ebpf.Map, n int) ([]uint64, error) {
	out := make([]uint64, n)
	var vals []uint64
	for i := range n {
		if err := m.Lookup(uint32(i), &vals); err != nil {
			return nil, fmt.Errorf("read counter %d: %w", i, err)
		}
		for _, v := range vals {
			out[i] += v
		}
	}
	return out, nil
}

func clearMap(m *ebpf.Map) error {
	var keys [][]byte
	k := make([]byte, m.KeySize())
	v := make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, append([]byte(nil), k...))
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// as16 is an address IPv4 mapped, as the program compares them.
// The addresses' table (reflector.c: stamp_rf_addrs): slots, and the
// longest run a lookup may take.
const addrSlots, maxAddrProbes = 256, 16

// addrHash is reflector.c's lim_hash of an address, which the program loads
// as two little-endian words.
func addrHash(a [16]byte) uint64 {
	x := binary.LittleEndian.Uint64(a[:8])*0x9E3779B97F4A7C15 ^ binary.LittleEndian.Uint64(a[8:])
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	return x ^ x>>33
}

// addrTable places the addresses in the program's table by linear probing
// from their hashes; probes is how many slots a lookup must try to find
// any of them (and to miss, it stops at a free one).
func addrTable(addrs []netip.Addr) (table [addrSlots]reflectorPlainRfAddr, probes int, err error) {
	for _, a := range addrs {
		b := as16(a)
		w := [2]uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
		h := addrHash(b)
		for i := range maxAddrProbes {
			e := &table[(h+uint64(i))%addrSlots]
			if e.Used != 0 && e.A == w {
				break // listed twice
			}
			if e.Used == 0 {
				*e = reflectorPlainRfAddr{A: w, Used: 1}
				probes = max(probes, i+1)
				break
			}
			if i == maxAddrProbes-1 {
				return table, 0, fmt.Errorf("%d addresses: %s needs more than %d slots of the XDP reflector's table", len(addrs), a, maxAddrProbes)
			}
		}
	}
	return table, probes, nil
}

// AddressesFit says whether the program's table takes these addresses:
// nil, or why not.
func AddressesFit(addrs []netip.Addr) error {
	_, _, err := addrTable(addrs)
	return err
}

func as16(a netip.Addr) [16]byte {
	if a.Is4() {
		return netip.AddrFrom16(netip.AddrFrom4(a.As4()).As16()).As16()
	}
	return a.As16()
}

// SetClock changes the Error Estimates and the time offsets, the part of
// the config that moves at run time, leaving the rest.
func (r *Reflector) SetClock(ee [2]uint16, utcOff, ptpOff int64) error {
	var v reflectorPlainRfConfig
	if err := r.maps.StampRfConfig.Lookup(uint32(0), &v); err != nil {
		return err
	}
	v.Ee, v.UtcOff, v.PtpOff = ee, utcOff, ptpOff
	return r.maps.StampRfConfig.Put(uint32(0), v)
}
