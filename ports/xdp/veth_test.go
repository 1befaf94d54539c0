//go:build linux

package xdp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/internal/netns"
)

// TestVethXDPTx: on a veth, what an offload sends back (XDP_TX) reaches the
// peer only when the peer has an XDP program of its own (or GRO). Without,
// the veth counts the frames as lost (rx_queue_0_xdp_tx_errors): the port
// shows them as xdp_tx_errors and says so once, with the fix; with a
// program on the peer (netns.PassXDP: the fix's XDP_PASS program) the
// frames arrive, and nothing is said.
func TestVethXDPTx(t *testing.T) {
	for _, peerProg := range []bool{false, true} {
		t.Run(map[bool]string{false: "bare_peer", true: "peer_with_xdp"}[peerProg], func(t *testing.T) {
			ns := netns.New(t)
			netns.Veth(t, ns, "xa", ns, "xb")
			if peerProg {
				ns.PassXDP(t, "xb")
			}
			peer := openRaw(t, ns, "xb")
			l := &logs{}
			p := openPort(t, ns, Options{Name: "p0", Interface: "xa", Rules: []Rule{{UDPDstPort: ptr(863)}},
				RingSize: 64, Log: l.logger(slog.LevelInfo)})
			if p.veth == nil || p.veth.peer != "xb" {
				t.Fatalf("veth watch %+v: want one, naming the peer xb", p.veth)
			}
			if err := p.Compose([]*offload.Request{macSwapRequest(t, 862)}); err != nil {
				t.Fatal(err)
			}
			const n = 10
			for range n {
				peer.send(t, frame6(t, "2001:db8::2", nil, 862))
			}
			if peerProg {
				back := peer.recv(t, n, func(f []byte) bool {
					return len(f) > 14 && bytes.Equal(f[0:6], macA) && bytes.Equal(f[6:12], macB)
				})
				if len(back) != n {
					t.Errorf("the peer got %d of %d back", len(back), n)
				}
			}
			var st map[string]uint64
			for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				st = p.Stats().Extra
				if st["xdp_offload_tx"] == n && (peerProg || st["xdp_tx_errors"] == n) {
					break
				}
			}
			p.Stats() // a second look says nothing more
			warned := l.lines("XDP_TX frames lost")
			switch {
			case st["xdp_offload_tx"] != n:
				t.Errorf("xdp_offload_tx %d, want %d", st["xdp_offload_tx"], n)
			case peerProg && (st["xdp_tx_errors"] != 0 || len(warned) != 0):
				t.Errorf("xdp_tx_errors %d, warnings %q; want none", st["xdp_tx_errors"], warned)
			case !peerProg && st["xdp_tx_errors"] != n:
				t.Errorf("xdp_tx_errors %d, want %d", st["xdp_tx_errors"], n)
			case !peerProg && (len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") ||
				!strings.Contains(warned[0], "`ip link set dev xb xdp obj pass.o sec xdp`")):
				t.Errorf("want one warning with the fix; the log:\n%s", l)
			}
		})
	}
}
