package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/internal/enginetest"
)

// routedEngine builds (does not start) a routed engine on mem ports and serves
// its control API; it returns the address.
func routedEngine(t *testing.T) string {
	t.Helper()
	e := enginetest.New(t, `version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "r0"
driver = "mem"
peer = "r1"
mac = "02:00:00:00:01:01"
addresses = ["2001:db8:1::1/64", "192.0.2.1/24"]
[[ports]]
name = "r1"
driver = "mem"
peer = "r0"
mac = "02:00:00:00:02:01"
addresses = ["2001:db8:2::1/64"]
[[neighbors]]
address = "2001:db8:2::2"
mac = "02:00:00:00:02:02"
port = "r1"
[[pipelines]]
name = "router"
rx = ["r0", "r1"]
[[pipelines.stages]]
kind = "neighbor"
[[pipelines.stages]]
kind = "route"
`, appliance.Options{})
	return enginetest.Serve(t, e)
}

func cli(run func([]string, *bytes.Buffer, *bytes.Buffer) int, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func routeCmd(args []string, o, e *bytes.Buffer) int    { return runRoute(args, o, e) }
func neighborCmd(args []string, o, e *bytes.Buffer) int { return runNeighbor(args, o, e) }

func TestRouteCommand(t *testing.T) {
	addr := routedEngine(t)
	c := "--control=" + addr
	code, out, errs := cli(routeCmd, c)
	if code != 0 {
		t.Fatalf("route: %d %s", code, errs)
	}
	for _, row := range [][]string{
		{"r0", "02:00:00:00:01:01", "1500", "1", "2001:db8:1::1/64", "192.0.2.1/24", "fe80::ff:fe00:101/64"},
		{"2001:db8:1::/64", "connected", "r0", "-"},
		{"192.0.2.1/32", "local", "r0", "-"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in:\n%s", row, out)
		}
	}
	if code, out, errs = cli(routeCmd, c, "add", "2001:db8:100::/48", "via", "2001:db8:2::2"); code != 0 ||
		strings.TrimSpace(out) != "added 2001:db8:100::/48 via 2001:db8:2::2 dev r1 (static)" {
		t.Fatalf("add: %d %q %s", code, out, errs)
	}
	if code, _, errs = cli(routeCmd, c, "add", "2001:db8:100::/48", "via", "2001:db8:2::3"); code != 1 || !strings.Contains(errs, "already routed") {
		t.Errorf("add twice: %d %s", code, errs)
	}
	if code, out, errs = cli(routeCmd, c, "add", "2001:db8:100::/48", "via", "2001:db8:2::4", "replace"); code != 0 ||
		strings.TrimSpace(out) != "replaced 2001:db8:100::/48 via 2001:db8:2::4 dev r1 (static)" {
		t.Errorf("add … replace: %d %q %s", code, out, errs)
	}
	if code, out, errs = cli(routeCmd, c, "replace", "2001:db8:100::/48", "via", "2001:db8:2::3"); code != 0 ||
		strings.TrimSpace(out) != "replaced 2001:db8:100::/48 via 2001:db8:2::3 dev r1 (static)" {
		t.Errorf("replace: %d %q %s", code, out, errs)
	}
	// replace adds what is not there yet, and says so.
	if code, out, errs = cli(routeCmd, c, "replace", "2001:db8:300::/48", "dev", "r1"); code != 0 ||
		strings.TrimSpace(out) != "added 2001:db8:300::/48 dev r1 (static)" {
		t.Errorf("replace of a new prefix: %d %q %s", code, out, errs)
	}
	// A static on-link route is static, like any route that can be deleted.
	if code, out, _ = cli(routeCmd, c); !hasRow(out, "2001:db8:300::/48", "static", "r1", "-") {
		t.Errorf("an on-link static route in the list: %d\n%s", code, out)
	}
	if code, out, _ = cli(routeCmd, c, "del", "2001:db8:300::/48"); code != 0 {
		t.Errorf("del on-link: %d %s", code, out)
	}
	// Flags after the arguments, as users write them.
	code, out, errs = cli(routeCmd, "get", "2001:db8:100::7", c, "--timeout", "5s")
	if code != 0 || !strings.Contains(out, "route     2001:db8:100::/48 via 2001:db8:2::3 dev r1 (static)") ||
		!strings.Contains(out, "neighbour none yet") {
		t.Errorf("get: %d\n%s%s", code, out, errs)
	}
	code, out, _ = cli(routeCmd, c, "--json", "get", "2001:db8:2::2")
	// protojson varies its spacing on purpose.
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), `"state": "STATIC"`) {
		t.Errorf("get --json: %d\n%s", code, out)
	}
	if code, out, _ = cli(routeCmd, c, "del", "2001:db8:100::/48"); code != 0 || strings.TrimSpace(out) != "deleted 2001:db8:100::/48" {
		t.Errorf("del: %d %q", code, out)
	}
	for _, bad := range [][]string{{"add"}, {"add", "::/0", "via"}, {"add", "::/0", "gateway", "x"}, {"frob"}, {"del"}} {
		if code, _, errs := cli(routeCmd, append([]string{c}, bad...)...); code != 2 || !strings.Contains(errs, "Usage:") {
			t.Errorf("%v: exit %d, %s", bad, code, errs)
		}
	}
	if code, out, _ := cli(routeCmd, "--help"); code != 0 || !strings.Contains(out, "Usage: linerate route") ||
		!strings.Contains(out, "\n  replace PREFIX [via ADDRESS] [dev PORT]\n") {
		t.Errorf("--help: %d\n%s", code, out)
	}
	// Bad input is refused with the reason.
	for _, bad := range []struct{ args, want []string }{
		{[]string{"add", "2001:db8:200::/48", "via", "fe80::1"}, []string{"next hop fe80::1 is link-local: name the port it is on"}},
		{[]string{"add", "2001:db8:200::/48", "via", "192.0.2.7"}, []string{"next hop 192.0.2.7 is IPv4 but prefix 2001:db8:200::/48 is IPv6"}},
		{[]string{"replace", "2001:db8:1::/64", "via", "2001:db8:2::2"}, []string{"2001:db8:1::/64 is connected", "cannot be added, replaced or deleted"}},
		{[]string{"add", "2001:db8:200::/48", "via", "2001:db8:2::1"}, []string{`next hop 2001:db8:2::1 is port "r1"'s own address`}},
	} {
		code, _, errs := cli(routeCmd, append(bad.args, c)...)
		for _, w := range bad.want {
			if code != 1 || !strings.Contains(errs, w) {
				t.Errorf("%v: exit %d, %s; want %q", bad.args, code, errs, w)
			}
		}
	}
	if code, _, errs := cli(routeCmd, "--control=unix:/nonexistent/x.sock", "--timeout=200ms"); code != 1 || !strings.Contains(errs, "cannot reach") {
		t.Errorf("no appliance: %d %s", code, errs)
	}
}

func TestNeighborCommand(t *testing.T) {
	addr := routedEngine(t)
	c := "--control=" + addr
	if code, out, errs := cli(neighborCmd, c, "add", "192.0.2.9", "lladdr", "02:00:00:00:01:09", "dev", "r0"); code != 0 ||
		strings.TrimSpace(out) != "added 192.0.2.9 lladdr 02:00:00:00:01:09 dev r0" {
		t.Fatalf("add: %d %q %s", code, out, errs)
	}
	code, out, errs := cli(neighborCmd, c)
	if code != 0 {
		t.Fatalf("list: %d %s", code, errs)
	}
	if !strings.Contains(out, "2 entries (capacity 4096)") || !strings.Contains(out, "192.0.2.9") || !strings.Contains(out, "2001:db8:2::2") {
		t.Errorf("list:\n%s", out)
	}
	code, out, _ = cli(neighborCmd, c, "list", "dev", "r1")
	if code != 0 || strings.Contains(out, "192.0.2.9") || !strings.Contains(out, "STATIC") {
		t.Errorf("list dev r1:\n%s", out)
	}
	if code, _, errs := cli(neighborCmd, c, "add", "192.0.2.9", "lladdr", "zz", "dev", "r0"); code != 1 || !strings.Contains(errs, "unicast Ethernet address") {
		t.Errorf("bad MAC: %d %s", code, errs)
	}
	if code, _, errs := cli(neighborCmd, c, "add", "192.0.2.9", "dev", "r0"); code != 2 || !strings.Contains(errs, "lladdr") {
		t.Errorf("no lladdr: %d %s", code, errs)
	}
	if code, _, errs := cli(neighborCmd, "add", "2001:db8:9::9", "lladdr", "02:00:00:00:01:09", "dev", "r0", c); code != 1 ||
		!strings.Contains(errs, `2001:db8:9::9 is outside the IPv6 prefixes of port "r0" (2001:db8:1::/64)`) {
		t.Errorf("a neighbour off the port's link: %d %s", code, errs)
	}
	if code, _, _ := cli(neighborCmd, c, "del", "192.0.2.9", "dev", "r0"); code != 0 {
		t.Errorf("del: %d", code)
	}
	if code, _, errs := cli(neighborCmd, c, "del", "192.0.2.9", "dev", "r0"); code != 1 || !strings.Contains(errs, "no neighbour") {
		t.Errorf("del again: %d %s", code, errs)
	}
	if code, _, errs := cli(neighborCmd, c, "list", "dev", "r9"); code != 1 || !strings.Contains(errs, `no port "r9"`) {
		t.Errorf("unknown port: %d %s", code, errs)
	}
}
