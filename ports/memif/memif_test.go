//go:build linux

package memif_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	pm "github.com/linerate/linerate/ports/memif"
)

func newPool(t testing.TB, name string) *packet.Slab {
	t.Helper()
	pool, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	})
	return pool
}

// TestClientServer: linerate's two roles talk to each other, both ways, and
// a client comes back after the server restarts.
func TestClientServer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	pool := newPool(t, "memif-cs")
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := pm.New(pm.Options{Name: "cli", Socket: sock, Pool: pool, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	relay(t, cli, srv, pool, 300)
	relay(t, srv, cli, pool, 300)
	srv.Close()
	if srv, err = pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool, RingSize: 64}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	relay(t, cli, srv, pool, 100)
	if s := cli.Stats(); s.Extra["connects"] != 2 || s.Extra["disconnects"] != 1 {
		t.Errorf("client stats %+v", s.Extra)
	}
}

// relay sends n numbered frames from a to b and checks they arrive in order.
func relay(t *testing.T, a, b *pm.Port, pool packet.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !a.Info().LinkUp || !b.Info().LinkUp {
		if time.Now().After(deadline) {
			t.Fatal("never connected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sent, got := 0, 0
	var tx, rx packet.Burst
	for got < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames after 30s: %+v %+v", got, n, a.Stats(), b.Stats())
		}
		for tx.N < 32 && sent+tx.N < n && pool.Alloc(&tx, 1) == 1 {
			d, _ := tx.H[tx.N-1].P().Append(64 + (sent+tx.N)%900)
			d[0], d[1] = byte((sent+tx.N-1)>>8), byte(sent+tx.N-1)
		}
		k := a.TxBurst(0, &tx)
		copy(tx.H[:], tx.H[k:tx.N])
		tx.N -= k
		sent += k
		rx.N = 0
		b.RxBurst(0, &rx)
		for _, h := range rx.Handles() {
			d := h.P().Data()
			if i := int(d[0])<<8 | int(d[1]); i != got || len(d) != 64+(got+1)%900 {
				t.Fatalf("frame %d: got number %d, %d bytes", got, i, len(d))
			}
			got++
		}
		packet.Free(&rx)
	}
	packet.Free(&tx)
}

// TestHostileClient: a client whose descriptors point outside its region
// gets them counted as rx_bad_desc, never read.
func TestHostileClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	pool := newPool(t, "memif-hostile")
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	reg, err := memif.NewRegion("hostile", memif.RingBytes(4)*2+4096)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	c, err := memif.Dial(memif.ClientConfig{Socket: sock, Name: "hostile", Regions: []*memif.Region{reg},
		Rings: []memif.RingSpec{{Kind: memif.C2S, Log2: 4}, {Kind: memif.S2C, Offset: uint32(memif.RingBytes(4)), Log2: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.C2S[0]
	*r.D(0) = memif.Desc{Offset: 1 << 30, Length: 64}                   // past the region
	*r.D(1) = memif.Desc{Region: 5, Length: 64}                         // no such region
	*r.D(2) = memif.Desc{Offset: uint32(len(reg.Mem) - 10), Length: 64} // runs off its end
	*r.D(3) = memif.Desc{Offset: uint32(memif.RingBytes(4) * 2), Length: 64}
	r.SetHead(4)
	var b packet.Burst
	deadline := time.Now().Add(30 * time.Second)
	for b.N == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing received: %+v", srv.Stats())
		}
		srv.RxBurst(0, &b)
	}
	if b.N != 1 || b.H[0].P().Len() != 64 {
		t.Errorf("received %d packets", b.N)
	}
	packet.Free(&b)
	if s := srv.Stats(); s.Extra["rx_bad_desc"] != 3 || s.RxPackets != 1 {
		t.Errorf("stats %+v", s)
	}
	if r.Tail() != 4 {
		t.Errorf("tail %d: the bad slots were not given back", r.Tail())
	}
}
