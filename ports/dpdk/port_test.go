//go:build dpdk

package dpdk

import (
	"reflect"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// TestNullQueues: net_null with two rx queues hashed by RSS and two tx queues;
// both rx queues deliver, Info and Stats describe the device, and closing
// removes the vdev so that the name can be made again.
func TestNullQueues(t *testing.T) {
	requireEAL(t)
	dev := vdev("net_null")
	p, err := Open(Options{Name: "q", Device: dev, RxQueues: 2, TxQueues: 2, MTU: 1600})
	if err != nil {
		t.Fatal(err)
	}
	in := p.Info()
	if in.RxQueues != 2 || in.TxQueues != 2 || !in.LinkUp || !in.OwnPoolOnly || in.TimestampSource != TimestampEngine ||
		!strings.HasPrefix(in.Driver, "dpdk/net_null") || in.MTU != 1600 {
		t.Errorf("info %+v", in)
	}
	var b packet.Burst
	for q := 0; q < 2; q++ {
		b.N = 0
		if n := p.RxBurst(q, &b); n != packet.MaxBurst {
			t.Fatalf("queue %d: %d packets", q, n)
		}
		if l := b.P(0).Len(); l != 64 {
			t.Fatalf("net_null packet of %d bytes", l)
		}
		if sent := p.TxBurst(1-q, &b); sent != b.N {
			t.Fatalf("tx queue %d took %d of %d", 1-q, sent, b.N)
		}
	}
	st := p.Stats()
	if st.RxPackets != 2*packet.MaxBurst || st.TxPackets != 2*packet.MaxBurst {
		t.Errorf("stats rx %d tx %d", st.RxPackets, st.TxPackets)
	}
	if st.Extra["rx_good_packets"] != 2*packet.MaxBurst || st.Extra["rx_q1_packets"] != packet.MaxBurst {
		t.Errorf("xstats: rx_good_packets %d rx_q1_packets %d (of %d names)", st.Extra["rx_good_packets"], st.Extra["rx_q1_packets"], len(st.Extra))
	}
	if _, err := Open(Options{Name: "twice", Device: dev}); err == nil || !strings.Contains(err.Error(), "open already") {
		t.Errorf("a second open of %s: %v", dev, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := p.Stats(); got.RxPackets != st.RxPackets {
		t.Errorf("stats after Close: rx %d, want the last reading %d", got.RxPackets, st.RxPackets)
	}
	again, err := Open(Options{Name: "again", Device: dev})
	if err != nil {
		t.Fatalf("reopen %s after Close: %v", dev, err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	requireEAL(t)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Name: "x"}, "device is required"},
		{Options{Name: "x", Device: vdev("net_null"), RSS: []string{"ipx"}}, `rss hash type "ipx"`},
		{Options{Name: "x", Device: vdev("net_null"), RxTimestamp: "ptp"}, "rx_timestamp"},
		{Options{Name: "x", Device: vdev("net_null"), RxQueues: 2000}, "outside 1..1024"},
		{Options{Name: "x", Device: vdev("net_nosuchdriver")}, "rte_vdev_init"},
		{Options{Name: "x", Device: vdev("net_null"), RxTimestamp: TimestampHardware}, "RTE_ETH_RX_OFFLOAD_TIMESTAMP"},
		{Options{Name: "x", Device: vdev("net_ring"), RxQueues: 2, RSS: []string{"ip"}}, "cannot hash"},
		{Options{Name: "x", Device: vdev("net_null"), PoolSize: 10}, "pool_size"},
		{Options{Name: "x", Device: vdev("net_null"), MTU: 9000}, "data_room"},
	} {
		p, err := Open(c.o)
		if err == nil {
			p.Close()
			t.Errorf("%+v: opened", c.o)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %q lacks %q", c.o, err, c.want)
		}
	}
}

// TestPoolAccounting: Alloc and Free in bulk, exhaustion counted, every mbuf
// back at the end.
func TestPoolAccounting(t *testing.T) {
	requireEAL(t)
	pool, err := PoolFor(0, 255, 32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if pool.Headroom() != Headroom || pool.DataRoom() != 1024 || pool.Available() != 255 {
		t.Fatalf("headroom %d data room %d available %d", pool.Headroom(), pool.DataRoom(), pool.Available())
	}
	var bursts [5]packet.Burst
	total := 0
	for i := range bursts {
		total += pool.Alloc(&bursts[i], packet.MaxBurst)
	}
	if total != 255 || pool.Stats().InUse != 255 {
		t.Fatalf("allocated %d, in use %d", total, pool.Stats().InUse)
	}
	if pool.Stats().AllocFail != 5*packet.MaxBurst-255 {
		t.Errorf("AllocFail %d, want %d", pool.Stats().AllocFail, 5*packet.MaxBurst-255)
	}
	if _, ok := pool.AllocOne(); ok {
		t.Fatal("AllocOne from an empty pool")
	}
	p := bursts[0].P(0)
	if p.Len() != 0 || p.Headroom() != Headroom || p.Tailroom() != 1024 || packet.PoolOf(p) != packet.Pool(pool) {
		t.Errorf("fresh packet: len %d headroom %d tailroom %d", p.Len(), p.Headroom(), p.Tailroom())
	}
	for i := range bursts {
		packet.Free(&bursts[i])
	}
	h, ok := pool.AllocOne()
	if !ok {
		t.Fatal("AllocOne after Free")
	}
	pool.FreeOne(h)
	if pool.Available() != 255 || pool.Stats().InUse != 0 {
		t.Fatalf("available %d in use %d after freeing everything", pool.Available(), pool.Stats().InUse)
	}
}

func TestLayout(t *testing.T) {
	if err := checkLayout(); err != nil {
		t.Fatal(err)
	}
}

// TestLayoutMismatch: the start-up check refuses the C mirrors a stale
// lr_meta.h would give, naming the first field that differs.
func TestLayoutMismatch(t *testing.T) {
	// Exported fields: the types exist for reflect only.
	type goMeta struct {
		InPort, InQueue uint16
		Hash            uint32
		Own             struct {
			State, Stage uint8
			Owner        uint16
		}
	}
	type same struct {
		In_port, In_queue    uint16
		Hash                 uint32
		Own_state, Own_stage uint8
		Own_owner            uint16
	}
	type swapped struct {
		In_queue, In_port    uint16
		Hash                 uint32
		Own_state, Own_stage uint8
		Own_owner            uint16
	}
	type resized struct {
		In_port, In_queue uint16
		Hash              uint32
		Own_state         uint16
		Own_owner         uint16
	}
	g := reflect.TypeFor[goMeta]()
	if err := sameLayout(g, reflect.TypeFor[same]()); err != nil {
		t.Errorf("same layout: %v", err)
	}
	for _, c := range []struct {
		c    reflect.Type
		want string
	}{
		{reflect.TypeFor[swapped](), ".InPort (2 bytes at 0) is In_queue (2 bytes at 0) in C"},
		{reflect.TypeFor[resized](), "has 12 bytes in 6 fields, its C mirror 12 in 5"},
	} {
		if err := sameLayout(g, c.c); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.c, err, c.want)
		}
	}
}
