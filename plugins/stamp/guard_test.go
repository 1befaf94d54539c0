package stamp

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// A reflector never answers a reflected packet: one that came back from a
// reflector (or a spoofed request bounced off one) would otherwise go back
// and forth between two reflectors forever. A reply to a sender session of
// this node goes on to its collector.
func TestReflectorNeverAnswersReflected(t *testing.T) {
	key := writeKey(t, strings.Repeat("42", 32))
	for _, c := range []struct{ name, snd, rfl string }{
		{"unauthenticated", "", reflectorKeys},
		{"authenticated", fmt.Sprintf("authenticated = true\nkey_file = %q\n", key),
			reflectorKeys + fmt.Sprintf("authenticated = true\nkey_file = %q\n", key)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := newChain(t, c.snd, c.rfl, "")
			h := ch.h
			rr := h.run(endSRv6(t, h.produce(ch.snd)[0]), 0, ch.rfl)
			if rr.dropped != "" {
				t.Fatal(rr.dropped)
			}
			// The reply, back at a reflector with the same session (in
			// another engine: no sender session of that SSID there).
			other := newHarness(t)
			rfl2 := other.MustBuildNamed("stamp.reflector", "refl", c.rfl)
			back := endSRv6(t, rr.data)
			if got := other.run(back, 0, rfl2); got.dropped != "stamp_reflected" {
				t.Errorf("a second reflector: %q, want stamp_reflected", got.dropped)
			}
			if got := other.StageCounter("refl", "reflected"); got != 0 {
				t.Errorf("it reflected %d", got)
			}
			// Here the sender session waits for it: it passes, untouched,
			// to the collector, which takes it.
			if got := h.run(back, 1, ch.rfl); got.dropped != "" || got.port != packet.NoPort || string(got.data) != string(back) {
				t.Errorf("the reply at its own node's reflector: dropped %q, port %d", got.dropped, got.port)
			}
			if got := h.run(back, 1, ch.rfl, ch.coll); got.dropped != "consumed" {
				t.Errorf("reflector then collector: %q", got.dropped)
			}
			if got := h.StageCounter("refl", "reflected"); got != 1 {
				t.Errorf("reflected %d, want 1", got)
			}
		})
	}
}

// By default a reflector answers one source at most DefaultRateBurst at once
// and DefaultRateLimit a second after that; rate_limit = "0" lifts it.
func TestReflectorDefaultRateLimit(t *testing.T) {
	for _, c := range []struct {
		name, keys string
		first      int // answered of 3×burst at one instant
		later      int // answered of as many a second later
	}{
		{"default", "", DefaultRateBurst, DefaultRateBurst},
		{"no limit", `rate_limit = "0"`, 3 * DefaultRateBurst, 3 * DefaultRateBurst},
		{"configured", "rate_limit = \"50pps\"\nrate_burst = 10\n", 10, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			snd := h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
			rfl := h.MustBuildNamed("stamp.reflector", "refl", c.keys+"\n[[sessions]]\nssid = 7\n")
			f := endSRv6(t, h.produce(snd)[0])
			send := func() (answered, limited int) {
				for i := 0; i < 3*DefaultRateBurst; i++ {
					switch r := h.run(f, 0, rfl); r.dropped {
					case "":
						answered++
					case "stamp_rate_limited":
						limited++
					default:
						t.Fatalf("dropped %q", r.dropped)
					}
				}
				return
			}
			if a, l := send(); a != c.first || a+l != 3*DefaultRateBurst {
				t.Errorf("at once: %d answered, %d rate limited; want %d answered", a, l, c.first)
			}
			h.advance(time.Second)
			if a, _ := send(); a != c.later {
				t.Errorf("a second later: %d answered, want %d", a, c.later)
			}
		})
	}
}

// The per-source bucket runs on arrival times: test packets that came at
// 500 a second are all answered, even when the lcore takes three bursts of
// them at once, late.
func TestReflectorRateLimitArrivals(t *testing.T) {
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	rfl := h.MustBuildNamed("stamp.reflector", "refl", "[[sessions]]\nssid = 7\n")
	f := endSRv6(t, h.produce(snd)[0])
	var bursts []*packet.Burst
	for k := 0; k < 3; k++ {
		b := &packet.Burst{}
		for i := 0; i < packet.MaxBurst; i++ {
			h.advance(2 * time.Millisecond)
			b.Push(h.Pkt(f, 0))
		}
		bursts = append(bursts, b)
	}
	answered := 0
	for _, b := range bursts {
		for _, r := range h.runBurst(b, rfl) {
			if r.dropped == "" {
				answered++
			}
		}
	}
	if answered != 3*packet.MaxBurst {
		t.Errorf("%d of %d answered", answered, 3*packet.MaxBurst)
	}
}

// setAddrs edits a frame's IP source and destination and fixes its
// checksums.
func setAddrs(t testing.TB, f []byte, src, dst netip.Addr) {
	t.Helper()
	_, l := payloadOf(t, f)
	if l.IPVersion == 4 {
		ip := packet.IPv4(f[l.L3:])
		ip.SetSrc(src.As4())
		ip.SetDst(dst.As4())
		ip.SetChecksum(0)
		ip.SetChecksum(ip.CalculateChecksum())
	} else {
		ip := packet.IPv6(f[l.L3:])
		ip.SetSrc(src.As16())
		ip.SetDst(dst.As16())
	}
	fixUDP(t, f)
}

// A reflector answers one host, from its own address: not a group or
// broadcast source or destination (IP or MAC, the directed broadcast of a
// port's prefix included), nor an unspecified or loopback source. Each is a
// named drop; nothing is reflected.
func TestReflectorRefusesAddresses(t *testing.T) {
	h := newHarness(t)
	h.Ports[0].Addrs = []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24"), netip.MustParsePrefix("2001:db8:b::2/64")}
	snd6 := h.MustBuildNamed("stamp.sender", "tx6", `
src = "2001:db8:a::2"
src_mac = "02:00:00:00:00:0a"
dst_mac = "02:00:00:00:00:0e"
[[sessions]]
ssid = 7
reflector = "2001:db8:b::2"
`)
	snd4 := h.MustBuildNamed("stamp.sender", "tx4", `
src = "198.51.100.9"
src_mac = "02:00:00:00:00:0a"
dst_mac = "02:00:00:00:00:0e"
[[sessions]]
ssid = 8
reflector = "192.0.2.1"
`)
	rfl := h.MustBuildNamed("stamp.reflector", "refl", "[[sessions]]\nssid = 7\n[[sessions]]\nssid = 8\n")
	f6, f4 := h.produce(snd6)[0], h.produce(snd4)[0]
	a := netip.MustParseAddr
	ip := func(base []byte, src, dst string) []byte {
		f := append([]byte(nil), base...)
		setAddrs(t, f, a(src), a(dst))
		return f
	}
	mac := func(base []byte, off int, m string) []byte {
		f := append([]byte(nil), base...)
		var b [6]byte
		if _, err := fmt.Sscanf(m, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]); err != nil {
			t.Fatal(err)
		}
		copy(f[off:], b[:])
		return f
	}
	const bad, group = "stamp_bad_source", "stamp_group_destination"
	for _, c := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"IPv6 unicast", f6, ""},
		{"IPv4 unicast", f4, ""},
		{"IPv6 unspecified source", ip(f6, "::", "2001:db8:b::2"), bad},
		{"IPv6 loopback source", ip(f6, "::1", "2001:db8:b::2"), bad},
		{"IPv6 multicast source", ip(f6, "ff02::1", "2001:db8:b::2"), bad},
		{"IPv4-mapped loopback source", ip(f6, "::ffff:127.0.0.1", "2001:db8:b::2"), bad},
		{"IPv6 multicast destination", ip(f6, "2001:db8:a::2", "ff02::1"), group},
		{"IPv4 unspecified source", ip(f4, "0.0.0.0", "192.0.2.1"), bad},
		{"IPv4 loopback source", ip(f4, "127.0.0.1", "192.0.2.1"), bad},
		{"IPv4 multicast source", ip(f4, "224.0.0.1", "192.0.2.1"), bad},
		{"IPv4 broadcast source", ip(f4, "255.255.255.255", "192.0.2.1"), bad},
		{"IPv4 directed broadcast source", ip(f4, "192.0.2.255", "192.0.2.1"), bad},
		{"IPv4 multicast destination", ip(f4, "198.51.100.9", "224.0.0.251"), group},
		{"IPv4 broadcast destination", ip(f4, "198.51.100.9", "255.255.255.255"), group},
		{"IPv4 directed broadcast destination", ip(f4, "198.51.100.9", "192.0.2.255"), group},
		{"broadcast MAC destination", mac(f4, 0, "ff:ff:ff:ff:ff:ff"), group},
		{"IPv4 multicast MAC destination", mac(f4, 0, "01:00:5e:00:00:fb"), group},
		{"IPv6 multicast MAC destination", mac(f6, 0, "33:33:00:00:00:01"), group},
		{"group MAC source", mac(f6, 6, "ff:ff:ff:ff:ff:ff"), bad},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.run(c.frame, 0, rfl)
			if r.dropped != c.want {
				t.Fatalf("got %q, want %q", r.dropped, c.want)
			}
			if c.want == "" && (r.data[0]&1 != 0 || r.data[6]&1 != 0) {
				t.Errorf("reply MACs %x", r.data[:12])
			}
		})
	}
	if got := h.StageCounter("refl", "reflected"); got != 2 {
		t.Errorf("reflected %d, want 2", got)
	}
}

// Two nodes that measure each other, each with a collector and a reflector
// in one pipeline on the default port, in either order, and the same SSID
// both ways: each collector takes its replies, each reflector answers the
// other's requests, and neither takes what the other should.
func TestCollectorAndReflectorOnePipeline(t *testing.T) {
	node := func(t *testing.T, self, peer netip.Addr, forward string) (*harness, []stageRef) {
		h := newHarness(t)
		snd := h.MustBuildNamed("stamp.sender", "tx", fmt.Sprintf(`
src = %q
src_mac = "02:00:00:00:00:0a"
dst_mac = "02:00:00:00:00:0e"
[[sessions]]
ssid = 7
reflector = %q
`, self, peer))
		coll := h.MustBuildNamed("stamp.collector", "coll", "")
		rfl := h.MustBuildNamed("stamp.reflector", "refl", fmt.Sprintf("forward = %q\n[[sessions]]\nssid = 7\n", forward))
		return h, []stageRef{{"tx", snd}, {"coll", coll}, {"refl", rfl}}
	}
	for _, order := range []struct {
		name    string
		forward string
		chain   func(st []stageRef) []stageRef
	}{
		{"collector first", "in", func(st []stageRef) []stageRef { return []stageRef{st[1], st[2]} }},
		{"reflector first, down the chain", "", func(st []stageRef) []stageRef { return []stageRef{st[2], st[1]} }},
	} {
		t.Run(order.name, func(t *testing.T) {
			ha, sa := node(t, addrS, addrR, order.forward)
			hb, sb := node(t, addrR, addrS, order.forward)
			// What leaves a node's chain (forwarded, or continued past its
			// end) goes to the other.
			through := func(h *harness, st []stageRef, f []byte) result {
				var ps []plugins.Stage
				for _, s := range order.chain(st) {
					ps = append(ps, s.st)
				}
				return h.run(f, 0, ps...)
			}
			for i := 0; i < 5; i++ {
				for _, dir := range []struct {
					from, to *harness
					fst, tst []stageRef
					name     string
				}{{ha, hb, sa, sb, "a→b"}, {hb, ha, sb, sa, "b→a"}} {
					req := dir.from.produce(dir.fst[0].st)[0]
					rep := through(dir.to, dir.tst, req)
					if rep.dropped != "" {
						t.Fatalf("%s: request at the reflector's node: %q", dir.name, rep.dropped)
					}
					if !reflected(payloadOfT(t, rep.data)) {
						t.Fatalf("%s: the request left the peer unanswered", dir.name)
					}
					if got := through(dir.from, dir.fst, rep.data); got.dropped != "consumed" {
						t.Fatalf("%s: reply at the sender's node: %q", dir.name, got.dropped)
					}
				}
				ha.advance(time.Second)
				hb.advance(time.Second)
			}
			for _, x := range []struct {
				name string
				h    *harness
			}{{"a", ha}, {"b", hb}} {
				if got := len(drain(x.h.registry().tx.Load().get(7))); got != 5 {
					t.Errorf("node %s: %d records, want 5", x.name, got)
				}
				if got := x.h.StageCounter("refl", "reflected"); got != 5 {
					t.Errorf("node %s: reflected %d, want 5", x.name, got)
				}
			}
		})
	}
}

type stageRef struct {
	name string
	st   plugins.Stage
}

// payloadOfT is a frame's STAMP payload and whether it is authenticated.
func payloadOfT(t testing.TB, f []byte) ([]byte, bool) {
	t.Helper()
	pay, _ := payloadOf(t, f)
	_, auth := ssidOf(pay)
	return pay, auth
}

// trimTail removes the last n octets of a frame's UDP payload.
func trimTail(t testing.TB, f []byte, n int) []byte {
	t.Helper()
	_, l := payloadOf(t, f)
	c := append([]byte(nil), f[:int(l.End)-n]...)
	u := packet.UDP(c[l.L4:])
	u.SetLength(u.Length() - uint16(n))
	if l.IPVersion == 4 {
		ip := packet.IPv4(c[l.L3:])
		ip.SetTotalLength(ip.TotalLength() - uint16(n))
		ip.SetChecksum(0)
		ip.SetChecksum(ip.CalculateChecksum())
	} else {
		ip := packet.IPv6(c[l.L3:])
		ip.SetPayloadLength(ip.PayloadLength() - uint16(n))
	}
	fixUDP(t, c)
	return c
}

// A session that sends an HMAC TLV takes only replies whose HMAC TLV is
// there and verifies, whatever their flags say; a failure at the reflector
// comes back signed, with I set, and is a record that says so.
func TestCollectorIntegrity(t *testing.T) {
	key := writeKey(t, strings.Repeat("5c", 32))
	for _, mode := range []struct{ name, snd, rfl string }{
		{"authenticated", fmt.Sprintf("authenticated = true\nkey_file = %q\ntlvs = [\"timestamp_info\"]\n", key),
			reflectorKeys + fmt.Sprintf("authenticated = true\nkey_file = %q\n", key)},
		{"HMAC TLV", fmt.Sprintf("hmac_tlv = true\nkey_file = %q\ntlvs = [\"timestamp_info\"]\n", key),
			reflectorKeys + fmt.Sprintf("key_file = %q\n", key)},
	} {
		t.Run(mode.name, func(t *testing.T) {
			ch := newChain(t, mode.snd, mode.rfl, "")
			h := ch.h
			reply := func(edit func(pay []byte)) []byte {
				h.advance(10 * time.Millisecond)
				f := endSRv6(t, h.produce(ch.snd)[0])
				if edit != nil {
					pay, _ := payloadOf(t, f)
					edit(pay)
					fixUDP(t, f)
				}
				rr := h.run(f, 0, ch.rfl)
				if rr.dropped != "" {
					t.Fatal(rr.dropped)
				}
				return endSRv6(t, rr.data)
			}
			_, lay := layouts(strings.HasPrefix(mode.name, "auth"))
			hmacTLV := func(pay []byte) int { return lay.base + TLVHeaderLen + TimestampInfoLen }
			for _, c := range []struct {
				name  string
				frame []byte
				want  string
				flags uint16
			}{
				{"genuine", reply(nil), "consumed", 0},
				{"HMAC TLV stripped", trimTail(t, reply(nil), TLVHeaderLen+HMACLen), "stamp_bad_hmac", 0},
				{"HMAC TLV wrong", func() []byte {
					f := reply(nil)
					pay, _ := payloadOf(t, f)
					pay[hmacTLV(pay)+TLVHeaderLen] ^= 1
					fixUDP(t, f)
					return f
				}(), "stamp_bad_hmac", 0},
				{"HMAC TLV wrong, I set", func() []byte {
					f := reply(nil)
					pay, _ := payloadOf(t, f)
					pay[lay.base] |= FlagI
					pay[hmacTLV(pay)] |= FlagI
					pay[hmacTLV(pay)+TLVHeaderLen] ^= 1
					fixUDP(t, f)
					return f
				}(), "stamp_bad_hmac", 0},
				{"I set after signing", func() []byte {
					f := reply(nil)
					pay, _ := payloadOf(t, f)
					pay[lay.base] |= FlagI
					fixUDP(t, f)
					return f
				}(), "stamp_bad_hmac", 0},
				{"failed at the reflector", reply(func(pay []byte) {
					s, _ := layouts(strings.HasPrefix(mode.name, "auth"))
					pay[s.base+TLVHeaderLen+TimestampInfoLen+TLVHeaderLen] ^= 1
				}), "consumed", RecTLVIntegrity},
			} {
				t.Run(c.name, func(t *testing.T) {
					if got := h.run(c.frame, 1, ch.coll); got.dropped != c.want {
						t.Fatalf("got %q, want %q", got.dropped, c.want)
					}
					if c.want != "consumed" {
						return
					}
					recs := drain(ch.session(7))
					if len(recs) != 1 || recs[0].Flags&(RecTLVIntegrity|RecTLVMalformed|RecTLVUnrecognized) != c.flags {
						t.Errorf("records %+v, want TLV flags %#x", recs, c.flags)
					}
				})
			}
		})
	}
}

// The collector takes replies on the port the sender sends from, wherever
// it was set: the sender stage, the session, the API, Init.
func TestCollectorFollowsSenderPort(t *testing.T) {
	for _, c := range []struct {
		name, stage, session string
		create               func(r *Registry) error
		want                 uint16
	}{
		{name: "stage src_port", stage: "src_port = 50000\n", want: 50000},
		{name: "session src_port", session: "src_port = 40000\n", want: 40000},
		{name: "API src_port", create: func(r *Registry) error {
			_, err := r.createSender(SenderSession{SSID: 9, Src: addrS, Reflector: addrR, SrcPort: 30000}, "", true)
			return err
		}, want: 30000},
		{name: "Init port", create: func(r *Registry) error {
			if err := r.initTx(initParams{port: 50000}, true); err != nil {
				return err
			}
			_, err := r.createSender(SenderSession{SSID: 9, Src: addrS, Reflector: addrR}, "", true)
			return err
		}, want: 50000},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			keys := fmt.Sprintf("src = %q\n%s", addrS, c.stage)
			if c.create == nil {
				keys += fmt.Sprintf("[[sessions]]\nssid = 9\nreflector = %q\n%s", addrR, c.session)
			}
			snd := h.MustBuildNamed("stamp.sender", "tx", keys)
			rfl := h.MustBuildNamed("stamp.reflector", "refl", "[[sessions]]\nssid = 9\n")
			coll := h.MustBuildNamed("stamp.collector", "coll", "")
			if c.create != nil {
				if err := c.create(h.registry()); err != nil {
					t.Fatal(err)
				}
			}
			f := h.produce(snd)[0]
			_, l := payloadOf(t, f)
			if got := packet.UDP(f[l.L4:]).SrcPort(); got != c.want {
				t.Fatalf("test packet from port %d, want %d", got, c.want)
			}
			rr := h.run(f, 0, rfl)
			if rr.dropped != "" {
				t.Fatal(rr.dropped)
			}
			if got := h.run(rr.data, 1, coll); got.dropped != "consumed" {
				t.Fatalf("collector: %q", got.dropped)
			}
			if n := len(drain(h.registry().tx.Load().get(9))); n != 1 {
				t.Errorf("%d records", n)
			}
			// A reply to another port is not the session's.
			other := append([]byte(nil), rr.data...)
			_, l = payloadOf(t, other)
			packet.UDP(other[l.L4:]).SetDstPort(c.want + 1)
			fixUDP(t, other)
			if got := h.run(other, 1, coll); got.dropped != "" {
				t.Errorf("a reply to port %d: %q", c.want+1, got.dropped)
			}
		})
	}
	// A fixed port takes only that one.
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", fmt.Sprintf("src = %q\nsrc_port = 50000\n[[sessions]]\nssid = 9\nreflector = %q\n", addrS, addrR))
	rfl := h.MustBuildNamed("stamp.reflector", "refl", "[[sessions]]\nssid = 9\n")
	coll := h.MustBuildNamed("stamp.collector", "coll", "port = 862\n")
	rr := h.run(h.produce(snd)[0], 0, rfl)
	if got := h.run(rr.data, 1, coll); got.dropped != "" {
		t.Errorf("port = 862 took a reply to 50000: %q", got.dropped)
	}
}
