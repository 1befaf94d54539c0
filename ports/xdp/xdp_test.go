//go:build linux

package xdp

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/porttest"
)

// wait bounds every wait for frames: a loaded machine can defer veth's
// softirqs for long.
const wait = 10 * time.Second

type rawSock struct{ fd int }

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openRaw is an AF_PACKET socket on ifname in ns: the test's independent
// sender and receiver on the far end of the veth.
func openRaw(t *testing.T, ns *netns.NS, ifname string) *rawSock {
	t.Helper()
	r := &rawSock{fd: -1}
	err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		if r.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(r.fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
			return err
		}
		return unix.Bind(r.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	})
	if r.fd >= 0 {
		t.Cleanup(func() { unix.Close(r.fd) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rawSock) send(t *testing.T, f []byte) {
	t.Helper()
	for tries := 0; ; tries++ {
		if _, err := unix.Write(r.fd, f); err == nil {
			return
		} else if (err != unix.EAGAIN && err != unix.ENOBUFS) || tries > 1000 {
			t.Fatalf("send: %v", err)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// recv reads frames that keep matches until it has want or wait passes.
func (r *rawSock) recv(t *testing.T, want int, keep func([]byte) bool) [][]byte {
	t.Helper()
	buf := make([]byte, 1<<16)
	var out [][]byte
	for deadline := time.Now().Add(wait); len(out) < want && time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err == unix.EAGAIN {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if keep(buf[:n]) {
			out = append(out, append([]byte(nil), buf[:n]...))
		}
	}
	return out
}

func openPort(t *testing.T, ns *netns.NS, o Options) *Port {
	t.Helper()
	var p *Port
	if err := ns.Do(func() (err error) { p, err = New(o); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// TestRxTx: the dispatcher takes the UDP port the rules name and leaves the
// rest to the kernel; the port receives those frames without a copy into its
// UMEM, stamped by the XDP program in the variant it loaded (the engine
// variant leaves RxTime to the engine), and transmits them back, MACs
// swapped, to the peer; every frame returns to the UMEM.
func TestRxTx(t *testing.T) {
	eachVariant(t, testRxTx)
}

func testRxTx(t *testing.T, v variant) {
	ns := netns.New(t)
	netns.Veth(t, ns, "xa", ns, "xb")
	peer := openRaw(t, ns, "xb")
	p := openPort(t, ns, Options{Name: "p0", Interface: "xa", Rules: []Rule{{UDPDstPort: ptr(862)}},
		Clock: clock.NewSystem(), RingSize: 256, forceVia: &v.via})
	info := p.Info()
	var index int
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName("xa")
		if err == nil {
			index = ifc.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	src, where := "kernel", v.name
	if v.via == viaNone {
		src, where = "engine", "the lcore's clock"
	}
	if info.TimestampSource != src || !strings.Contains(info.TimestampDetail, where) ||
		!strings.Contains(info.TimestampDetail, "copy") || !info.OwnPoolOnly || info.Ifindex != index {
		t.Errorf("info %+v, want ifindex %d, source %s, %s", info, index, src, where)
	}
	const n = 40
	sent := make([][]byte, n)
	before := clock.Mono()
	for i := range n {
		f := frame6(t, "2001:db8::2", nil, 862)
		f[len(f)-1] = byte(i)
		sent[i] = f
		peer.send(t, f)
		peer.send(t, frame6(t, "2001:db8::2", nil, 863)) // the kernel's
	}
	var b packet.Burst
	var got []packet.Handle
	for deadline := time.Now().Add(wait); len(got) < n && time.Now().Before(deadline); {
		b.N = 0
		k := p.RxBurst(0, &b)
		got = append(got, b.H[:k]...)
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if len(got) != n {
		t.Fatalf("received %d of %d", len(got), n)
	}
	after := clock.Mono()
	for i, h := range got {
		pk := h.P()
		d := pk.Data()
		// The frame as sent: the headroom variant's stamp is stripped.
		if !bytes.Equal(d, sent[i]) {
			t.Fatalf("frame %d:\n got % x\nwant % x", i, d, sent[i])
		}
		if pk.Offset() < packet.MinHeadroom {
			t.Errorf("frame %d: headroom %d", i, pk.Offset())
		}
		if v.via == viaNone && pk.RxTime != 0 {
			t.Errorf("frame %d: rx time %d from an engine variant, want 0 (the engine's to set)", i, pk.RxTime)
		}
		if v.via != viaNone && (pk.RxTime < before || pk.RxTime > after) {
			t.Errorf("frame %d: rx time %d outside [%d, %d]", i, pk.RxTime, before, after)
		}
		var tmp [6]byte
		copy(tmp[:], d[0:6])
		copy(d[0:6], d[6:12])
		copy(d[6:12], tmp[:])
	}
	for len(got) > 0 {
		b.N = copy(b.H[:], got)
		k := p.TxBurst(0, &b)
		got = got[k:]
	}
	back := peer.recv(t, n, func(f []byte) bool {
		return len(f) > 14 && bytes.Equal(f[0:6], macA) && bytes.Equal(f[6:12], macB)
	})
	if len(back) != n {
		t.Fatalf("peer got %d of %d back", len(back), n)
	}
	for i, f := range back {
		if len(f) != len(sent[i]) || f[len(f)-1] != byte(i) {
			t.Errorf("frame %d back: % x", i, f)
		}
	}
	// The completions come back with the next transmit.
	for deadline := time.Now().Add(wait); p.u.inUse.Load() != int64(p.q[0].fillLen) && time.Now().Before(deadline); {
		b.N = 0
		p.TxBurst(0, &b)
		time.Sleep(time.Millisecond)
	}
	st := p.Stats()
	if st.RxPackets != n || st.TxPackets != n || st.Extra["xdp_matched"] != n || st.Extra["xdp_passed"] < n ||
		st.Extra["xdp_no_room"] != 0 || st.RxBytes != uint64(n*len(sent[0])) {
		t.Errorf("stats %+v", st)
	}
	// The frames to port 863 (and whatever else the kernel sent) went by
	// the rules' summary, without the rule walk.
	if early := st.Extra["xdp_passed_early"]; early < n || early > st.Extra["xdp_passed"] {
		t.Errorf("xdp_passed_early %d, want %d to xdp_passed's %d", early, n, st.Extra["xdp_passed"])
	}
}

// TestRefuseOthers: an XDP program someone else attached with netlink is
// refused, by name; with replace it goes, and the port's own goes when the
// port closes.
func TestRefuseOthers(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "xa", ns, "xb")
	other, err := loadDispatcher(dispatcherConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	var ifindex int
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName("xa")
		if err != nil {
			return err
		}
		ifindex = ifc.Index
		return xdpSet(ifindex, other.prog.FD(), unix.XDP_FLAGS_DRV_MODE)
	}); err != nil {
		t.Fatal(err)
	}
	o := Options{Name: "p0", Interface: "xa", TakeAll: true, RingSize: 64}
	err = ns.Do(func() error { _, err := New(o); return err })
	if err == nil || !strings.Contains(err.Error(), "already has an XDP program") || !strings.Contains(err.Error(), "replace = true") {
		t.Fatalf("got %v", err)
	}
	o.Replace = true
	p := openPort(t, ns, o)
	if p.mode == "" {
		t.Fatal("not attached")
	}
	p.Close()
	if err := ns.Do(func() error {
		if _, _, ok := xdpAttached(ifindex); ok {
			return errFound
		}
		return nil
	}); err != nil {
		t.Error("an XDP program is left on the interface after Close")
	}
}

var errFound = &net.AddrError{Err: "found"}

// TestNoRules: an xdp port without match rules would take SSH: it refuses to
// open unless take_all says so.
func TestNoRules(t *testing.T) {
	o := Options{Name: "p0", Interface: "lo"}
	o.defaults()
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "take_all = true") {
		t.Errorf("got %v", err)
	}
	o.TakeAll = true
	if err := o.check(); err != nil {
		t.Error(err)
	}
}

// TestReload: a reload changes the match table of a running port, without
// detaching; any other key is refused and changes nothing.
func TestReload(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "xa", ns, "xb")
	p := openPort(t, ns, Options{Name: "p0", Interface: "xa", Rules: []Rule{{UDPDstPort: ptr(862)}}, RingSize: 64})
	l, was := p.d.link, p.d.active
	if err := p.Reload(porttest.Config("interface = \"xa\"\nring_size = 64\n[[match]]\nnext_header = 6\n")); err != nil {
		t.Fatal(err)
	}
	if len(p.opt.Rules) != 1 || p.opt.Rules[0].NextHeader == nil || p.d.link != l {
		t.Errorf("rules %+v, link kept %v", p.opt.Rules, p.d.link == l)
	}
	// The table the attached program reads is the other half now
	// (TestDispatcherRules runs a reload through the program).
	var ctl [16]byte
	if err := p.d.control.Lookup(uint32(0), &ctl); err != nil {
		t.Fatal(err)
	}
	if ctl[0] != byte(was^1) || ctl[4] != 1 {
		t.Errorf("control % x: want active %d, count 1", ctl, was^1)
	}
	err := p.Reload(porttest.Config("interface = \"xa\"\nring_size = 128\n[[match]]\nnext_header = 6\n"))
	if err == nil || !strings.Contains(err.Error(), "only match and take_all change with a reload") {
		t.Errorf("ring_size change: %v", err)
	}
	err = p.Reload(porttest.Config("interface = \"xa\"\nring_size = 64\n"))
	if err == nil || !strings.Contains(err.Error(), "take_all") {
		t.Errorf("no rules: %v", err)
	}
}
