package builtin

import (
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
)

// TestProcessAllocs: Process allocates nothing in forward, counter, classify
// and sink (generator and link have their own tests).
func TestProcessAllocs(t *testing.T) {
	for _, c := range []struct{ kind, keys string }{
		{"forward", "port = \"eth1\"\nswap_mac = true"},
		{"forward", "port = \"in\"\ndst_mac = \"02:00:00:00:00:01\""},
		{"counter", ""},
		{"classify", "default = \"drop\"\n[[rules]]\nudp_dst_port = 20000\ndst_prefix = \"2001:db8::/32\"\nport = \"ring0\"\n[[rules]]\nhop_by_hop = true\nport = \"eth0\""},
		{"sink", "udp_port = 20000"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			h := newHarness(t)
			h.Clock.Set(int64(time.Second))
			st := h.mustBuild(c.kind, c.keys)
			var raws [][]byte
			for _, f := range []frame{udp6(1, 20000), {src: "2001:db8::1", dst: "2001:db8::2", hbh: true, srh: 2}, {v4: true, src: "192.0.2.1", dst: "192.0.2.2"}} {
				raws = append(raws, f.bytes())
			}
			g := newGen(t, h, "src = \"2001:db8::1\"\ndst = \"2001:db8::2\"\nflows = 8\nsizes = [128, 1500]\n")
			h.Env.Freed = make([]packet.Handle, 0, 64)
			b := &packet.Burst{}
			step := func() {
				b.N = 0
				h.Clock.Advance(time.Microsecond)
				h.Ctx.Now = h.Clock.Now()
				g.Produce(&h.Ctx, b) // 64 generator packets; the first three rewritten
				b.N = 32
				for i := 0; i < len(raws); i++ {
					p := b.P(i)
					_ = p.Trim(p.Len())
					d, _ := p.Append(len(raws[i]))
					copy(d, raws[i])
				}
				st.Process(&h.Ctx, b)
				for i := 0; i < b.N; i++ {
					if b.P(i).Verdict() != packet.Consume {
						packet.FreeOne(b.H[i])
					}
				}
				for i := b.N; i < 64; i++ {
					packet.FreeOne(b.H[i])
				}
				h.Env.Flush()
			}
			step()
			if a := testing.AllocsPerRun(100, step); a != 0 {
				t.Errorf("%.1f allocations per burst, want 0", a)
			}
		})
	}
}
