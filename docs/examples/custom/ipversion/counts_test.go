package ipversion_test

import (
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/docs/examples/custom/ipversion"
	"github.com/linerate/linerate/plugins/stagetest"
)

// frame is an Ethernet header with the TPIDs and EtherType given, padded to 60
// bytes.
func frame(types ...uint16) []byte {
	f := make([]byte, 12, 60)
	for i, t := range types {
		f = append(f, byte(t>>8), byte(t))
		if i < len(types)-1 {
			f = append(f, 0, 100) // a tag's TCI
		}
	}
	return f[:max(len(f), 60)]
}

// TestCounts: every packet continues, counted by the EtherType after its VLAN
// tags; without allocating.
func TestCounts(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	h.NewPool("default", 64, 2048)
	st := h.MustBuild(ipversion.Kind, "")
	frames := [][]byte{
		frame(packet.EtherTypeIPv6),
		frame(packet.EtherTypeVLAN, packet.EtherTypeIPv4),
		frame(packet.EtherTypeQinQ, packet.EtherTypeVLAN, packet.EtherTypeIPv6),
		frame(packet.EtherTypeIPv4),
		frame(packet.EtherTypeARP),
		make([]byte, 13), // no EtherType
		frame(packet.EtherTypeQinQ, packet.EtherTypeVLAN, packet.EtherTypeVLAN, packet.EtherTypeIPv4), // three tags
	}
	o := h.Run(h.Burst(0, frames...), st)
	if len(o.Continued) != len(frames) || len(o.Forwarded)+len(o.Dropped)+o.Consumed != 0 {
		t.Fatalf("%+v; want every packet to continue", o)
	}
	o.Free()
	for name, want := range map[string]uint64{"ipv4": 2, "ipv6": 2, "other": 3} {
		if got := h.Counter(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if _, err := h.Build(ipversion.Kind, `drop = true`); err == nil {
		t.Error("a key it does not have was accepted")
	}

	b := h.Burst(0, frames...)
	if a := testing.AllocsPerRun(100, func() { st.Process(&h.Ctx, b) }); a != 0 {
		t.Errorf("%.1f allocations per burst, want 0", a)
	}
	packet.Free(b)
}
