// Package lpm holds longest-prefix-match tables for IPv4 and IPv6 that stay
// fast at a full Internet table and change in place: DIR-24-8 for IPv4, as
// DPDK's rte_lpm, and a multibit trie with the same 24-bit first stride and
// 8-bit strides below it for IPv6, as rte_lpm6.
//
// A table maps prefixes to next-hop ids (small integers the caller gives
// meaning to, at most MaxNextHop). It lives in the engine's appliance tree,
// beside the rings, because it knows nothing of routing: a FIB, a classifier
// matching destination prefixes or an ACL can each put their own ids in it.
//
// # Layout
//
// Every entry is a uint32: a valid bit, an extension bit, the depth (prefix
// length) of the rule that filled it, and 22 bits of value, a next-hop id
// plus one (a leaf: valid bit set) or, with the extension bit, the index of
// a group of 256 entries one stride further down. A lookup turns its last
// entry into the answer with one subtraction: a leaf gives its next hop, an
// empty entry (0) NoNextHop. tbl24 holds 2^24 entries indexed by the first 24 bits of the
// address (64 MiB of address space); groups hold the next 8 bits each. An IPv4
// lookup reads at most two entries: tbl24, then one group entry for a prefix
// longer than /24. An IPv6 lookup reads tbl24 and then one entry per 8 bits
// past bit 24, down to the longest prefix stored under the address's path (4
// reads under a /48, 2 under a /32 with nothing longer).
//
// The /0 route does not write tbl24's 16M entries. Group 0 is the default
// group: its 256 entries all hold the /0 rule (or nothing), and an empty
// tbl24 entry (0) reads it with the same conditional read that follows a
// group entry, so that a lookup reads tbl24, then a group where tbl24 holds
// no leaf, and has no branch of its own for the default. Inside the other
// groups an entry no longer rule covers holds the /0 rule itself; changing
// the default route rewrites those, a pass over the groups used (a few ms at
// a full IPv4 table's 20k groups).
//
// # Updates
//
// Insert and Delete change only the entries the prefix covers, as rte_lpm
// does: a rules table per depth says, on delete, which shorter rule takes the
// freed entries back. Writers take the table's mutex; lookups take no lock and
// never block. Every entry is written and read whole with sync/atomic (a plain
// MOV on x86), and a new group is filled before the entry that points to it is
// stored, so a reader sees an entry either before or after a change, never
// torn.
//
// A group that no longer holds anything longer than its parent entry is
// folded back into that entry. It stays bound to that entry's place in the
// trie, so a reader that loaded the old pointer just before still reads
// entries that belong to its own address; a new expansion at the same place
// reuses it. Groups move to another place only through Reclaim, after a
// grace period the caller proves (every reader passed a quiescent point).
//
// # Memory
//
// tbl24 and the group pool are anonymous mappings made once, with
// MAP_NORESERVE, outside the Go heap: the garbage collector never scans or
// counts them, and a page costs memory only once an entry on it is written.
// See Stats and the README for what a table costs per route.
package lpm

import (
	"errors"
	"sync/atomic"
)

const (
	entValid   = 1 << 31
	entExt     = 1 << 30
	depthShift = 22
	valMask    = 1<<depthShift - 1

	// MaxNextHop is the largest next-hop id a table holds.
	MaxNextHop = valMask - 1
	// MaxGroups is the largest group pool a table can have (group ids run
	// from 1, after the default group).
	MaxGroups = valMask

	groupSize = 256
	rootBits  = 24
)

// Errors of the table's updates.
var (
	ErrFull     = errors.New("lpm: no free group for a prefix longer than /24; the table is full")
	ErrNextHop  = errors.New("lpm: next-hop id out of range")
	ErrLength   = errors.New("lpm: prefix length out of range")
	ErrNotFound = errors.New("lpm: no such prefix")
)

// mkEntry is the leaf of a rule of length depth to nh. It holds nh+1, so that
// a lookup turns a leaf or an empty entry (0) into its answer with one
// subtraction, empty giving NoNextHop.
func mkEntry(depth int, nh uint32) uint32 { return entValid | uint32(depth)<<depthShift | (nh + 1) }

func entDepth(e uint32) int { return int(e>>depthShift) & 0xff }

func load(p *uint32) uint32 { return atomic.LoadUint32(p) }

func store(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// Stats say what a table holds and what it costs.
type Stats struct {
	Rules       int   // prefixes, /0 included
	Groups      int   // groups in use
	GroupsBound int   // groups folded back but kept for their place (see Reclaim)
	GroupsMax   int   // the pool's size
	Resident    int64 // bytes of tbl24 and groups that memory holds (pages written)
}
