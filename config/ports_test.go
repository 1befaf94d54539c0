package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// routedDoc is a routed-mode document with two ports.
const routedDoc = `version = 1
[[ports]]
name = "eth0"
driver = "mem"
mac = "02:00:00:00:01:01"
addresses = ["2001:db8:1::1/64", "192.0.2.1/24"]
[[ports]]
name = "eth1"
driver = "mem"
addresses = ["2001:db8:2::1/64"]
ifid = 7
[[pipelines]]
name = "main"
rx = ["eth0", "eth1"]
[[pipelines.stages]]
kind = "sink"
`

func TestPortAddressKeys(t *testing.T) {
	f, err := Parse("r.toml", []byte(routedDoc))
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := f.Ports[0], f.Ports[1]
	if p0.MAC != (MAC{2, 0, 0, 0, 1, 1}) || p1.MAC != (MAC{}) {
		t.Errorf("macs %v %v", p0.MAC, p1.MAC)
	}
	want := []netip.Prefix{netip.MustParsePrefix("2001:db8:1::1/64"), netip.MustParsePrefix("192.0.2.1/24")}
	if len(p0.Addresses) != 2 || p0.Addresses[0].Prefix != want[0] || p0.Addresses[1].Prefix != want[1] {
		t.Errorf("addresses %v", p0.Addresses)
	}
	if p0.IfID != 1 || p1.IfID != 7 {
		t.Errorf("ifids %d %d, want the default 1 and 7", p0.IfID, p1.IfID)
	}
	// The driver does not see the common keys.
	var rest map[string]any
	if err := p0.Decode(&rest); err != nil || len(rest) != 0 {
		t.Errorf("driver keys %v %v", rest, err)
	}
}

func TestPortAddressErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		want []string
	}{
		{"address without length", `version = 1
[[ports]]
name = "p0"
driver = "mem"
addresses = ["2001:db8::1"]
` + tail[strings.Index(tail, "[[pipelines]]"):], []string{
			`t.toml:5: ports[0].addresses[0]: interface address "2001:db8::1" has no prefix length: write it as "2001:db8::1/64" (IPv6) or "2001:db8::1/24" (IPv4)`,
		}},
		{"bad port keys", `version = 1
[[ports]]
name = "p0"
driver = "mem"
mac = "01:00:5e:00:00:01"
addresses = ["ff02::1/64", "192.0.2.0/24", "2001:db8::1/64"]
ifid = 3
[[ports]]
name = "p1"
driver = "mem"
addresses = ["2001:db8::1/128"]
ifid = 3
` + tail[strings.Index(tail, "[[pipelines]]"):], []string{
			`t.toml:5: ports[0].mac: 01:00:5e:00:00:01 is a multicast address; a port's own address must be unicast`,
			`t.toml:6: ports[0].addresses[0]: ff02::1/64: a port's address must be unicast, not unspecified, multicast or loopback`,
			`t.toml:6: ports[0].addresses[1]: 192.0.2.0/24 is the network address of its prefix; give the port one of its hosts`,
			`t.toml:11: ports[1].addresses[0]: 2001:db8::1 is already an address of ports[0]`,
			`t.toml:12: ports[1].ifid: 3 is already the ifid of ports[0]`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(c.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			got := strings.Split(err.Error(), "\n")
			if !slices.Equal(got, c.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
