package ioam

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/tshark"
)

// Wireshark's IOAM dissector (tshark 4.0) decodes linerate's trace options,
// inline and encapsulated, without malformed-packet or expert warnings, and
// reads the namespace, trace type, NodeLen, RemainingLen and each node's data
// as linerate wrote them.
func TestTshark(t *testing.T) {
	tshark.Require(t)
	dir := t.TempDir()
	if keep := os.Getenv("IOAM_PCAP_DIR"); keep != "" {
		dir = keep // keep the captures to look at them
	}
	h := newHarness(t)
	for _, mode := range []string{"inline", "encap"} {
		for _, tt := range []uint32{0xC00000, 0xF00000, 0xFC0000, 0x00E000, 0xFFF002} {
			t.Run(fmt.Sprintf("%s/type=%#06x", mode, tt), func(t *testing.T) {
				hops := 4
				if NodeLen(tt) > 8 {
					hops = 3
				}
				keys := func(k int) string {
					return fmt.Sprintf("node_id = %d\nnode_id_wide = %d\ntimestamp = \"posix\"\negress_port = \"eth1\"\n"+
						"namespaces = [ { id = 0x7b, data = %d, data_wide = %d, schema_id = %d, schema = \"0a0b0c0d\" } ]\n"+
						"interfaces = [ { port = \"eth0\", id = %d, id_wide = %d }, { port = \"eth1\", id = %d, id_wide = %d } ]\n",
						k, 0x1000+k, 0xD0+k, 0xDD00+k, 0x500+k, 10*k, 1000*k, 10*k+1, 1000*k+1)
				}
				enc := h.MustBuild("ioam.encap", keys(1)+fmt.Sprintf(`
mode = %q
inline_transit = true
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
[[profiles]]
trace = { namespace = 123, type = "%#06x", hops = %d }
`, mode, tt, hops))
				tr := h.MustBuild("ioam.transit", keys(2))
				in := buildFrame(t, frameSpec{payload: 64})
				out := h.run(in, 0, false, enc, tr).data
				path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".pcap")
				tshark.WritePcap(t, path, [][]byte{out})

				v := string(tshark.Run(t, "-r", path, "-V", "-o", "ip.check_checksum:TRUE"))
				for _, bad := range []string{"Malformed", "Expert Info", "Invalid", "Mismatch", "Unknown option"} {
					if strings.Contains(v, bad) {
						t.Errorf("tshark reports %q:\n%s", bad, v)
					}
				}
				fields := []string{"ipv6.opt.ioam.trace.ns", "ipv6.opt.ioam.trace.type", "ipv6.opt.ioam.trace.nodelen",
					"ipv6.opt.ioam.trace.remlen", "ipv6.opt.ioam.trace.node.id", "ipv6.opt.ioam.trace.node.hlim",
					"ipv6.opt.ioam.trace.node.iif", "ipv6.opt.ioam.trace.node.eif", "ipv6.opt.ioam.trace.node.id_wide",
					"ipv6.opt.ioam.trace.node.nsdata", "ipv6.opt.ioam.trace.node.nsdata_wide", "ipv6.opt.ioam.trace.node.oss.scid"}
				args := []string{"-r", path, "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,"}
				for _, f := range fields {
					args = append(args, "-e", f)
				}
				raw := tshark.Run(t, args...)
				got := strings.Split(strings.TrimSpace(string(raw)), "|")
				if len(got) != len(fields) {
					t.Fatalf("tshark fields: %q", raw)
				}
				val := map[string]string{}
				for i, f := range fields {
					val[f] = got[i]
				}
				free := hops - 2
				want := map[string]string{
					"ipv6.opt.ioam.trace.ns":      "123",
					"ipv6.opt.ioam.trace.type":    "0x" + strconv.FormatUint(uint64(tt), 16),
					"ipv6.opt.ioam.trace.nodelen": strconv.Itoa(NodeLen(tt)),
					"ipv6.opt.ioam.trace.remlen":  strconv.Itoa(free * (NodeLen(tt) + boolInt(tt&TraceOpaqueState != 0)*2)),
				}
				// Newest node first, as in the packet.
				if tt&TraceHopLimNodeID != 0 {
					want["ipv6.opt.ioam.trace.node.id"] = "2,1"
					want["ipv6.opt.ioam.trace.node.hlim"] = "64,64"
				}
				if tt&TraceIfIDs != 0 {
					want["ipv6.opt.ioam.trace.node.iif"] = "20,10"
					want["ipv6.opt.ioam.trace.node.eif"] = "21,11"
				}
				if tt&TraceNamespaceData != 0 {
					want["ipv6.opt.ioam.trace.node.nsdata"] = fmt.Sprintf("%d,%d", 0xD2, 0xD1)
				}
				if tt&TraceHopLimNodeIDWide != 0 {
					want["ipv6.opt.ioam.trace.node.id_wide"] = fmt.Sprintf("%d,%d", 0x1002, 0x1001)
					want["ipv6.opt.ioam.trace.node.hlim"] = "64,64"
					if tt&TraceHopLimNodeID != 0 {
						want["ipv6.opt.ioam.trace.node.hlim"] = "64,64,64,64" // short and wide, per node
					}
				}
				if tt&TraceNamespaceDataWide != 0 {
					want["ipv6.opt.ioam.trace.node.nsdata_wide"] = fmt.Sprintf("%d,%d", 0xDD02, 0xDD01)
				}
				if tt&TraceOpaqueState != 0 {
					want["ipv6.opt.ioam.trace.node.oss.scid"] = fmt.Sprintf("%d,%d", 0x502, 0x501)
				}
				for f, w := range want {
					if !equalNum(val[f], w) {
						t.Errorf("%s = %q, want %q", f, val[f], w)
					}
				}
			})
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// equalNum compares comma-separated numbers that tshark may print in hex.
func equalNum(got, want string) bool {
	g, w := strings.Split(got, ","), strings.Split(want, ",")
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		a, err1 := strconv.ParseUint(strings.TrimSpace(g[i]), 0, 64)
		b, err2 := strconv.ParseUint(strings.TrimSpace(w[i]), 0, 64)
		if err1 != nil || err2 != nil || a != b {
			return false
		}
	}
	return true
}
