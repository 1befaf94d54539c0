package external

import (
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
)

// bigPool is a shared slab of more than 4 GiB: a sparse memfd, so it costs
// address space, not memory.
func bigPool(t *testing.T) *packet.Slab {
	t.Helper()
	p, err := packet.NewSlab(packet.SlabConfig{Name: "over-4gib", Buffers: 66000, DataRoom: 65535, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if _, mem, _, _ := p.SharedMemory(); len(mem) <= 1<<32 {
		t.Fatalf("the pool has %d bytes, not over 4 GiB", len(mem))
	}
	return p
}

// TestSharedPoolOver4GiB: a descriptor's offset is 32 bits. A shared pool
// of more than 4 GiB is refused at build with an error naming it, and a link
// never maps one (its packets would be copied), so no offset is truncated.
func TestSharedPoolOver4GiB(t *testing.T) {
	big := bigPool(t)
	err := checkRegions()
	if err == nil || !strings.Contains(err.Error(), `"over-4gib"`) || !strings.Contains(err.Error(), "4 GiB") {
		t.Fatalf("checkRegions: %v, want the pool named and the 4 GiB limit", err)
	}

	dir := t.TempDir()
	sv := &supervisor{cfg: stageConfig{RingSize: 1024}, name: "big", dir: dir}
	ln, err := memif.Listen(sv.socket())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *memif.Conn, 1)
	go func() {
		c, _ := ln.Accept(memif.ServerConfig{MaxC2S: 1, MaxS2C: 1, PollC2S: true})
		accepted <- c
	}()
	l, err := sv.dial(0, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if peer := <-accepted; peer != nil {
		defer peer.Close()
	}
	defer l.close()
	if r := l.regionOf[big.ID()]; r != 0 {
		t.Errorf("the link maps the pool of over 4 GiB as region %d", r)
	}
}
