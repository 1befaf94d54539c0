package route

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/linerate/linerate/config"
)

// tail ends a test document: a pipeline for its ports.
const tail = `[[pipelines]]
name = "main"
[[pipelines.stages]]
kind = "sink"
`

// routedDoc is a routed-mode document with two ports, a route and a neighbour.
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
[[routes]]
prefix = "2001:db8:100::/48"
via = "2001:db8:2::2"
[[routes]]
prefix = "0.0.0.0/0"
via = "192.0.2.254"
port = "eth0"
[[routes]]
prefix = "2001:db8:200::/48"
port = "eth1"
[[neighbors]]
address = "2001:db8:2::2"
mac = "02:00:00:00:02:02"
port = "eth1"
[[pipelines]]
name = "main"
rx = ["eth0", "eth1"]
[[pipelines.stages]]
kind = "sink"
`

func TestStaticTables(t *testing.T) {
	f, err := config.Parse("r.toml", []byte(routedDoc))
	if err != nil {
		t.Fatal(err)
	}
	routes, err := staticRoutes(f.Section("routes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 3 || routes[0].Via.Addr != netip.MustParseAddr("2001:db8:2::2") || routes[0].Port != "" ||
		routes[1].Prefix.Prefix != netip.MustParsePrefix("0.0.0.0/0") || routes[2].Via.IsValid() {
		t.Errorf("routes %+v", routes)
	}
	neighbors, err := staticNeighbors(f.Section("neighbors"))
	if err != nil {
		t.Fatal(err)
	}
	if len(neighbors) != 1 || neighbors[0].MAC != (config.MAC{2, 0, 0, 0, 2, 2}) || neighbors[0].Port != "eth1" {
		t.Errorf("neighbors %+v", neighbors)
	}
	if _, err := staticRoutes(config.Table{}); err != nil {
		t.Errorf("a file without routes: %v", err)
	}
}

func TestStaticErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		want []string
	}{
		{"bad routes", `version = 1
[[ports]]
name = "p0"
driver = "mem"
addresses = ["2001:db8:1::1/64"]
[[routes]]
prefix = "2001:db8:9::/48"
[[routes]]
prefix = "2001:db8:9::/48"
via = "192.0.2.1"
[[routes]]
prefix = "10.0.0.0/8"
via = "10.1.1.1"
[[routes]]
prefix = "2001:db8:8::/48"
via = "fe80::1"
[[routes]]
prefix = "2001:db8:7::/48"
via = "2001:db8:1::9"
port = "p9"
[[routes]]
via = "2001:db8:1::9"
` + tail[strings.Index(tail, "[[pipelines]]"):], []string{
			`t.toml:6: routes[0]: needs a next hop: via = "address", or port = "name" for an on-link prefix`,
			`t.toml:9: routes[1].prefix: 2001:db8:9::/48 is already routed by routes[0]`,
			`t.toml:10: routes[1].via: next hop 192.0.2.1 is IPv4 but prefix 2001:db8:9::/48 is IPv6: a next hop is of its prefix's family`,
			`t.toml:13: routes[2].via: next hop 10.1.1.1 is on no port's prefix: name the port, or give a port an address on its link`,
			`t.toml:16: routes[3].via: next hop fe80::1 is link-local: name the port it is on`,
			`t.toml:20: routes[4].port: no port "p9"`,
			`t.toml:21: routes[5].prefix: missing: the destination, e.g. prefix = "2001:db8:2::/48"`,
		}},
		{"bad neighbors", `version = 1
[[ports]]
name = "p0"
driver = "mem"
addresses = ["2001:db8::1/64"]
[[neighbors]]
address = "2001:db8::2"
mac = "02:00:00:00:00:02"
port = "p0"
[[neighbors]]
address = "2001:db8::2"
mac = "03:00:00:00:00:02"
port = "p0"
[[neighbors]]
address = "ff02::2"
port = "nope"
[[neighbors]]
mac = "02:00:00:00:00:03"
` + tail[strings.Index(tail, "[[pipelines]]"):], []string{
			`t.toml:11: neighbors[1].address: 2001:db8::2 on port "p0" is already set by neighbors[0]`,
			`t.toml:12: neighbors[1].mac: 03:00:00:00:00:02 is a multicast address; a neighbour's address must be unicast`,
			`t.toml:14: neighbors[2].mac: missing: the neighbour's Ethernet address, e.g. mac = "02:00:00:00:00:02"`,
			`t.toml:15: neighbors[2].address: ff02::2: a neighbour's address must be unicast`,
			`t.toml:16: neighbors[2].port: no port "nope"`,
			`t.toml:17: neighbors[3].address: missing: the neighbour's IP address, e.g. address = "2001:db8:1::2"`,
			`t.toml:17: neighbors[3].port: missing: the port the neighbour is on`,
		}},
		{"routed mode's rules", `version = 1
[[ports]]
name = "p0"
driver = "mem"
addresses = ["2001:db8:1::1/64", "192.0.2.1/24"]
[[ports]]
name = "p1"
driver = "mem"
addresses = ["2001:db8:1::2/64", "198.51.100.1/24"]
[[ports]]
name = "p2"
driver = "mem"
addresses = ["192.0.2.5/32"]
[[routes]]
prefix = "2001:db8:100::/48"
via = "2001:db8:1::1"
[[routes]]
prefix = "2001:db8:1::/64"
via = "2001:db8:1::9"
[[routes]]
prefix = "192.0.2.1/32"
port = "p0"
[[routes]]
prefix = "fe80::/64"
port = "p0"
[[routes]]
prefix = "10.0.0.0/8"
via = "fe80::1"
port = "p0"
[[routes]]
prefix = "2001:db8:200::/48"
via = "fe80::1"
port = "p2"
[[routes]]
prefix = "2001:db8:300::/48"
via = "fe80::1"
port = "p0"
[[neighbors]]
address = "2001:db8:9::2"
mac = "02:00:00:00:00:02"
port = "p0"
[[neighbors]]
address = "198.51.100.1"
mac = "02:00:00:00:00:02"
port = "p1"
[[neighbors]]
address = "2001:db8::2"
mac = "02:00:00:00:00:02"
port = "p2"
[[neighbors]]
address = "fe80::2"
mac = "02:00:00:00:00:02"
port = "p0"
[[neighbors]]
address = "198.51.100.7"
mac = "02:00:00:00:00:02"
port = "p1"
` + tail[strings.Index(tail, "[[pipelines]]"):], []string{
			`t.toml:9: ports[1].addresses[0]: 2001:db8:1::2/64: prefix 2001:db8:1::/64 is already on ports[0]; a prefix belongs to one port's link`,
			`t.toml:16: routes[0].via: next hop 2001:db8:1::1 is port "p0"'s own address: a next hop is another node on the link`,
			`t.toml:18: routes[1].prefix: 2001:db8:1::/64 is connected: port "p0" has 2001:db8:1::1/64 on it; connected routes come from the ports' addresses and cannot be added, replaced or deleted`,
			`t.toml:21: routes[2].prefix: 192.0.2.1/32 is port "p0"'s own address (192.0.2.1/24): local routes come from the ports' addresses`,
			`t.toml:24: routes[3].prefix: fe80::/64 is link-local: link-local destinations are never routed`,
			`t.toml:28: routes[4].via: next hop fe80::1 is IPv6 but prefix 10.0.0.0/8 is IPv4: a next hop is of its prefix's family`,
			`t.toml:32: routes[5].via: next hop fe80::1 is link-local, and port "p2" has no IPv6 address`,
			`t.toml:39: neighbors[0].address: 2001:db8:9::2 is outside the IPv6 prefixes of port "p0" (2001:db8:1::/64): a neighbour is on the port's link`,
			`t.toml:43: neighbors[1].address: 198.51.100.1 is port "p1"'s own address, not a neighbour's`,
			`t.toml:47: neighbors[2].address: 2001:db8::2 is on no prefix of port "p2", which has no IPv6 address: a neighbour is on the port's link`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse("t.toml", []byte(c.doc))
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
