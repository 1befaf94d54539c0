package ioam

import (
	"github.com/linerate/linerate/appliance/packet"
)

// warmNamespaces is the namespace count from which a transit node warms
// its burst: below it the namespaces' state (about 1.2 KiB each: the
// namespace, four node plans and their per-burst images) stays in L1 and
// L2, and warming would only cost its own time.
const warmNamespaces = 1024

// warm reads, ahead of taking the packets of b, one word of every cache
// line taking them will read of their namespaces' state: per packet its
// first trace's namespace (the index, the namespace, its last plan: the
// header, the image the node data comes from, the per-burst image) and its
// POT option's key. Each is a chain of dependent loads that, with thousands
// of namespaces, miss the cache one after the other (BenchmarkTransitNamespaces);
// here the burst's chains advance a link at a time, side by side, so that
// their misses overlap, as the RLNC receiver's warm and the STAMP stages'
// do. Read-only, on a scan of its own (the packets' scratch is left as it
// was): a guess that is wrong costs a wasted read, never a wrong result.
func (t *transit) warm(b *packet.Burst) {
	if b.N < 2 || len(t.ns.ids) < warmNamespaces {
		return
	}
	// Per packet: its trace's and its POT option's namespace ids, bit 16
	// set where the packet has one.
	var tids, pids [packet.MaxBurst]uint32
	var s scan
	for i := 0; i < b.N; i++ {
		tids[i], pids[i] = 0, 0
		p := b.H[i].P()
		d := p.Data()
		l3 := ipv6At14(p, d)
		if l3 < 0 || l3+packet.IPv6Len > len(d) || d[l3+6] != packet.ProtocolHopByHop {
			continue
		}
		if scanPacket(d, l3, &s) != nil {
			continue
		}
		if s.nTrace > 0 {
			if body := Option(d[s.trace[0]:]).Body(); len(body) >= TraceHeaderLen {
				tids[i] = 1<<16 | uint32(Trace(body).NamespaceID())
			}
		}
		if s.pot != 0 {
			if body := Option(d[s.pot:]).Body(); len(body) >= 2 {
				pids[i] = 1<<16 | uint32(POT(body).NamespaceID())
			}
		}
	}
	// The indexes' first probes, then the lookups on warm slots.
	var x uint64
	for i := 0; i < b.N; i++ {
		if id := tids[i]; id != 0 {
			x += uint64(t.ns.idx.probe(uint16(id)))
		}
		if id := pids[i]; id != 0 {
			x += uint64(t.pot.idx.probe(uint16(id)))
		}
	}
	var nss [packet.MaxBurst]*nsState
	var keys [packet.MaxBurst]*POTKey
	for i := 0; i < b.N; i++ {
		nss[i], keys[i] = nil, nil
		if id := tids[i]; id != 0 {
			nss[i] = t.ns.lookup(uint16(id))
		}
		if id := pids[i]; id != 0 {
			keys[i] = t.pot.lookup(uint16(id))
		}
	}
	for i := 0; i < b.N; i++ {
		if ns := nss[i]; ns != nil {
			x += uint64(ns.ID)
			if ns.last != nil {
				x++
			}
		}
		if k := keys[i]; k != nil {
			x += k.Prime + k.LPC
		}
	}
	for i := 0; i < b.N; i++ {
		ns := nss[i]
		if ns == nil || ns.last == nil {
			continue
		}
		pl := ns.last
		x += uint64(pl.traceType) + uint64(pl.ops[0].off) + pl.curGen + uint64(pl.cur[0]) + uint64(pl.cur[curSize-1])
		for o := 0; o < pl.size && o < len(pl.image); o += 64 {
			x += uint64(pl.image[o])
		}
	}
	t.sink += x
}

// probe reads the slot a lookup of id looks at first (0 for a linear
// index).
func (x *idIndex) probe(id uint16) uint32 {
	if len(x.slots) == 0 {
		return 0
	}
	return x.slots[idHash(id, x.shift)&uint32(len(x.slots)-1)]
}
