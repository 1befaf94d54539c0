//go:build linux

package xdp

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/offload/offloadtest"
)

// XDP actions (linux/bpf.h).
const (
	xdpAborted  = 0
	xdpDrop     = 1
	xdpPass     = 2
	xdpTx       = 3
	xdpRedirect = 4
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

// frame6 is an Ethernet/IPv6 frame to dst, with Hop-by-Hop options opts
// (nil: none) and a UDP datagram to dport (0: TCP to port 22 instead).
func frame6(t testing.TB, dst string, hbh []layers.IPv6HopByHopOption, dport uint16) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP(dst)}
	ls := []gopacket.SerializableLayer{eth, ip}
	var l4 gopacket.SerializableLayer
	next := layers.IPProtocolUDP
	if dport == 0 {
		next = layers.IPProtocolTCP
		tcp := &layers.TCP{SrcPort: 40000, DstPort: 22, SYN: true, Window: 1000}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		l4 = tcp
	} else {
		udp := &layers.UDP{SrcPort: 40000, DstPort: layers.UDPPort(dport)}
		_ = udp.SetNetworkLayerForChecksum(ip)
		l4 = udp
	}
	if hbh != nil {
		ip.NextHeader = layers.IPProtocolIPv6HopByHop
		h := &layers.IPv6HopByHop{}
		h.NextHeader = next
		for i := range hbh {
			h.Options = append(h.Options, &hbh[i])
		}
		if n := 2 + len(h.Options)*2 + func() int {
			k := 0
			for _, o := range hbh {
				k += len(o.OptionData)
			}
			return k
		}(); n%8 != 0 { // PadN to a multiple of 8 bytes
			pad := 8 - n%8
			if pad == 1 {
				h.Options = append(h.Options, &layers.IPv6HopByHopOption{OptionType: 0})
			} else {
				h.Options = append(h.Options, &layers.IPv6HopByHopOption{OptionType: 1, OptionLength: uint8(pad - 2), OptionData: make([]byte, pad-2)})
			}
		}
		ls = append(ls, h)
	} else {
		ip.NextHeader = next
	}
	ls = append(ls, l4, gopacket.Payload(make([]byte, 20)))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// ioamOpt is an IOAM Pre-allocated Trace option (RFC 9486 type 0x31) with
// room for one node of 8 bytes.
func ioamOpt() layers.IPv6HopByHopOption {
	data := []byte{0, 0 /* reserved, type 0 pre-allocated */, 0, 1 /* namespace 1 */, 0x02, 0x08 /* 8 bytes left */, 0x80, 0, 0, 0}
	data = append(data, make([]byte, 8)...)
	return layers.IPv6HopByHopOption{OptionType: 0x31, OptionLength: uint8(len(data)), OptionData: data}
}

func ptr[T any](v T) *T { return &v }

// runOnce runs in through p and returns the verdict and the data out
// (BPF_PROG_TEST_RUN's: from the metadata area on).
func runOnce(t *testing.T, p *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	opts := &ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)}
	ret, err := p.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	return ret, opts.DataOut
}

// TestDispatcherRules: the match table takes what its rules say and leaves
// the rest to the kernel, in the plain variant of the program through
// BPF_PROG_TEST_RUN, in each stamp variant; with no socket on the queue a
// match is passed too, counted as such, and the kernel gets every frame it
// is passed byte for byte: the headroom variant takes its stamp back.
func TestDispatcherRules(t *testing.T) {
	eachVariant(t, testDispatcherRules)
}

func testDispatcherRules(t *testing.T, v variant) {
	d := loadVariant(t, v, false)
	rules := []Rule{
		{NextHeader: ptr(17), UDPDstPort: ptr(862)},
		{DstPrefix: netip.MustParsePrefix("2001:db8:aa::/48"), IOAM: ptr(true)},
	}
	if err := d.setRules(rules, false); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		frame []byte
		take  bool
	}{
		{"stamp", frame6(t, "2001:db8::2", nil, 862), true},
		{"other udp", frame6(t, "2001:db8::2", nil, 863), false},
		{"ssh", frame6(t, "2001:db8::2", nil, 0), false},
		{"ioam in prefix", frame6(t, "2001:db8:aa::9", []layers.IPv6HopByHopOption{ioamOpt()}, 0), true},
		{"ioam outside prefix", frame6(t, "2001:db8:ab::9", []layers.IPv6HopByHopOption{ioamOpt()}, 0), false},
		{"prefix without ioam", frame6(t, "2001:db8:aa::9", nil, 0), false},
		{"stamp behind hop-by-hop", frame6(t, "2001:db8::2", []layers.IPv6HopByHopOption{ioamOpt()}, 862), true},
		{"not ip", append(make([]byte, 12), 0x88, 0xb5), false},
		{"truncated ipv6", append(make([]byte, 12), 0x86, 0xdd, 0x60), false},
	}
	for _, c := range cases {
		before := d.stats()
		t0 := clock.Mono()
		ret, out := runOnce(t, d.prog, c.frame)
		t1 := clock.Mono()
		after := d.stats()
		if ret != xdpPass {
			t.Errorf("%s: action %d, want XDP_PASS (no socket)", c.name, ret)
		}
		took := after["xdp_matched"] - before["xdp_matched"]
		if (took == 1) != c.take {
			t.Errorf("%s: matched %d, want take=%v", c.name, took, c.take)
		}
		if c.take && after["xdp_no_socket"]-before["xdp_no_socket"] != 1 {
			t.Errorf("%s: no_socket not counted", c.name)
		}
		if !c.take && after["xdp_passed"]-before["xdp_passed"] != 1 {
			t.Errorf("%s: passed not counted", c.name)
		}
		if n := after["xdp_no_room"]; n != 0 {
			t.Errorf("%s: xdp_no_room %d", c.name, n)
		}
		// What the kernel gets is what came in, taken (no socket) or not.
		if got := kernelView(v, out, c.take); !bytes.Equal(got, c.frame) {
			t.Errorf("%s: frame changed on its way to the kernel\n got %x\nwant %x", c.name, got, c.frame)
		}
		if v.via == viaMeta && c.take {
			checkStamp(t, c.name, out, t0, t1)
		}
	}
	// A reload swaps the table in place: the SSH frame is now taken, the
	// STAMP one is not.
	if err := d.setRules([]Rule{{NextHeader: ptr(6)}}, false); err != nil {
		t.Fatal(err)
	}
	before := d.stats()
	runOnce(t, d.prog, frame6(t, "2001:db8::2", nil, 0))
	runOnce(t, d.prog, frame6(t, "2001:db8::2", nil, 862))
	after := d.stats()
	if after["xdp_matched"]-before["xdp_matched"] != 1 || after["xdp_passed"]-before["xdp_passed"] != 1 {
		t.Errorf("after reload: matched %d passed %d, want 1 and 1", after["xdp_matched"]-before["xdp_matched"],
			after["xdp_passed"]-before["xdp_passed"])
	}
	// take_all takes even what parses as nothing, and gives it back whole.
	if err := d.setRules(nil, true); err != nil {
		t.Fatal(err)
	}
	before = d.stats()
	odd := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	_, out := runOnce(t, d.prog, odd)
	if d.stats()["xdp_matched"]-before["xdp_matched"] != 1 {
		t.Error("take_all did not take a frame")
	}
	if got := kernelView(v, out, true); !bytes.Equal(got, odd) {
		t.Errorf("take_all, no socket: the kernel got %x, want %x", got, odd)
	}
}

// TestComposeMacSwap: a stage's program, linked into a slot, runs ahead of
// the match table in each stamp variant: the frames it wants leave by
// XDP_TX with their addresses swapped, the others meet the rules as before.
func TestComposeMacSwap(t *testing.T) {
	eachVariant(t, testComposeMacSwap)
}

func testComposeMacSwap(t *testing.T, v variant) {
	req := macSwapRequest(t, 862)
	d, err := loadDispatcher(dispatcherConfig{via: v.via}, []*offload.Request{req})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if err := d.setRules([]Rule{{UDPDstPort: ptr(863)}}, false); err != nil {
		t.Fatal(err)
	}
	in := frame6(t, "2001:db8::2", nil, 862)
	ret, out := runOnce(t, d.prog, in)
	if ret != xdpTx {
		t.Fatalf("action %d, want XDP_TX", ret)
	}
	want := append([]byte(nil), in...)
	copy(want[0:6], in[6:12])
	copy(want[6:12], in[0:6])
	if !bytes.Equal(out, want) {
		t.Errorf("out\n%x\nwant\n%x", out, want)
	}
	before := d.stats()
	other := frame6(t, "2001:db8::2", nil, 863)
	ret, out = runOnce(t, d.prog, other)
	if ret != xdpPass {
		t.Errorf("other frame: action %d", ret)
	}
	if !bytes.Equal(kernelView(v, out, true), other) {
		t.Errorf("other frame, no socket: the kernel got %x, want %x", out, other)
	}
	after := d.stats()
	if after["xdp_matched"]-before["xdp_matched"] != 1 || after["xdp_offload_tx"] != 1 {
		t.Errorf("counters %v", after)
	}
	c, err := req.Counters("counters")
	if err != nil {
		t.Fatal(err)
	}
	if c[0] != 1 || c[1] != 1 {
		t.Errorf("program counters %v, want swapped 1 skipped 1", c)
	}
	// The plain program of the same source gives the same bytes.
	spec, err := offloadtest.Spec(862)
	if err != nil {
		t.Fatal(err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	plain := coll.Programs[offloadtest.Plain]
	ret2, out2 := runOnce(t, plain, in)
	if ret2 != xdpTx || !bytes.Equal(out2, want) {
		t.Errorf("plain variant: action %d, bytes differ", ret2)
	}
}

// macSwapRequest is the MAC-swap test offload's request, for port: it
// swaps the addresses of UDP to port and sends the frame back (XDP_TX).
func macSwapRequest(t testing.TB, port uint16) *offload.Request {
	t.Helper()
	spec, err := offloadtest.Spec(port)
	if err != nil {
		t.Fatal(err)
	}
	shared := map[string]any{}
	req, err := offload.Ask(func(k string, mk func() any) any {
		if v, ok := shared[k]; ok {
			return v
		}
		shared[k] = mk()
		return shared[k]
	}, "swap", "test.toml:1", offload.XDP, offload.Program{Spec: spec, Slot: offloadtest.Slot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { req.Close() })
	return req
}
