package route_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/metrics"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/plugins/route/api"

	_ "github.com/linerate/linerate/appliance/all"
)

// memRouter: a generator behind mem port h0 sends to 2001:db8:100::/48 through
// a linerate router (r0, r1) to a sink behind h1; the next hops on r1's link
// are static neighbours. The rings towards the router and the sink hold all
// that is sent, so a starved lcore costs no packet.
func memRouter(count int) string {
	return fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "r0"
driver = "mem"
peer = "h0"
mac = "02:00:00:00:01:01"
addresses = ["2001:db8:1::1/64", "192.0.2.1/24"]
[[ports]]
name = "h0"
driver = "mem"
peer = "r0"
ring_size = 32768
[[ports]]
name = "r1"
driver = "mem"
peer = "h1"
ring_size = 32768
mac = "02:00:00:00:02:01"
addresses = ["2001:db8:2::1/64"]
[[ports]]
name = "h1"
driver = "mem"
peer = "r1"
ring_size = 32768

[[routes]]
prefix = "2001:db8:100::/48"
via = "2001:db8:2::2"

[[neighbors]]
address = "2001:db8:2::2"
mac = "02:00:00:00:02:02"
port = "r1"
[[neighbors]]
address = "2001:db8:2::3"
mac = "02:00:00:00:02:03"
port = "r1"

[[pipelines]]
name = "host0"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
src = "2001:db8:1::2"
dst = "2001:db8:100::1"
src_mac = "02:00:00:00:01:02"
dst_mac = "02:00:00:00:01:01"
flows = 16
sizes = [128]
rate = "20kpps"
count = %d
[[pipelines.stages]]
kind = "forward"
port = "h0"

[[pipelines]]
name = "router"
lcores = [1]
rx = ["r0", "r1"]
[[pipelines.stages]]
kind = "neighbor"
[[pipelines.stages]]
kind = "icmp"
[[pipelines.stages]]
kind = "route"
[[pipelines.stages]]
kind = "punt"

[[pipelines]]
name = "host1"
lcores = [0]
rx = ["h1"]
[[pipelines.stages]]
kind = "sink"
name = "sink"
`, count)
}

// TestRouteChangesDropNothing replaces the route's next hop over and over
// through the control API while traffic flows: every packet arrives, and the
// route counters show the changes.
func TestRouteChangesDropNothing(t *testing.T) {
	const count = 20000
	e := enginetest.New(t, memRouter(count), appliance.Options{})
	rc := api.NewRoutingClient(enginetest.Dial(t, e))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	changes := 0
	for changes < 200 {
		select {
		case <-e.Done():
		default:
			via := []string{"2001:db8:2::2", "2001:db8:2::3"}[changes%2]
			if _, err := rc.AddRoute(ctx, &api.AddRouteRequest{Prefix: "2001:db8:100::/48", Via: via, Replace: true}); err != nil {
				t.Fatal(err)
			}
			changes++
			continue
		}
		break
	}
	<-e.Done()
	s := e.Snapshot()
	if got := enginetest.Counter(s, "sink", "received"); got != count {
		t.Errorf("sink received %d of %d", got, count)
	}
	if len(s.Drops) != 0 {
		t.Errorf("drops: %+v", s.Drops)
	}
	if fw := enginetest.Counter(s, "route#2", "forwarded"); fw != count {
		t.Errorf("route forwarded %d", fw)
	}
	rs, err := rc.ListRoutes(ctx, &api.ListRoutesRequest{})
	if err != nil || rs.Added != uint64(changes) || rs.Removed != uint64(changes) {
		t.Errorf("ListRoutes counts %d added, %d removed, after %d changes (%v)", rs.GetAdded(), rs.GetRemoved(), changes, err)
	}
	// The lcore publishes the count while it runs; changes made as it
	// drained are not in it.
	if added := enginetest.Counter(s, "route#2", "routes_added"); added == 0 || added > uint64(changes) {
		t.Errorf("routes_added %d after %d changes", added, changes)
	}
	t.Logf("%d route changes while %d packets flowed", changes, count)

	// The same counters reach Prometheus.
	rec := httptest.NewRecorder()
	metrics.Handler(e).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		fmt.Sprintf(`linerate_stage_route_forwarded_total{kind="route",lcore="1",pipeline="router",stage="route#2"} %d`, count),
		`linerate_stage_neighbor_entries_created_total{kind="neighbor",lcore="1",pipeline="router",stage="neighbor#0"} 2`,
		`linerate_stage_route_routes_added_total{kind="route",lcore="1",pipeline="router",stage="route#2"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestControlAPI lists and changes the tables through the Routing service of a
// built engine.
func TestControlAPI(t *testing.T) {
	e := enginetest.New(t, memRouter(1), appliance.Options{})
	rc := api.NewRoutingClient(enginetest.Dial(t, e))
	ctx := context.Background()

	// linerate status shows a port's own MAC, and the port's MTU.
	if st := e.Status(); st.Ports[0].MAC != "02:00:00:00:01:01" || st.Ports[0].MTU != 1500 || st.Ports[1].MAC != "" {
		t.Errorf("status ports %+v", st.Ports)
	}

	ifs, err := rc.Interfaces(ctx, &api.InterfacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs.Interfaces) != 4 || ifs.Interfaces[0].Mac != "02:00:00:00:01:01" ||
		fmt.Sprint(ifs.Interfaces[0].Addresses) != "[2001:db8:1::1/64 192.0.2.1/24 fe80::ff:fe00:101/64]" || ifs.Interfaces[2].Ifid != 3 {
		t.Errorf("interfaces %v", ifs.Interfaces)
	}
	rs, err := rc.ListRoutes(ctx, &api.ListRoutesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range rs.Routes {
		lines = append(lines, fmt.Sprintf("%s %s %s %s", r.Prefix, r.Kind, r.Port, r.Via))
	}
	want := []string{
		"192.0.2.0/24 connected r0 ", "192.0.2.1/32 local r0 ",
		"2001:db8:1::/64 connected r0 ", "2001:db8:1::1/128 local r0 ", "2001:db8:2::/64 connected r1 ",
		"2001:db8:2::1/128 local r1 ", "2001:db8:100::/48 static r1 2001:db8:2::2",
		"fe80::ff:fe00:101/128 local r0 ", "fe80::ff:fe00:201/128 local r1 ",
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("routes\n%v\nwant\n%v", lines, want)
	}
	for _, c := range []struct {
		req  *api.AddRouteRequest
		code string
	}{
		{&api.AddRouteRequest{Prefix: "2001:db8:100::/48", Via: "2001:db8:2::3"}, "AlreadyExists"},
		{&api.AddRouteRequest{Prefix: "2001:db8:1::/64", Via: "2001:db8:2::3", Replace: true}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:1::/64", Port: "r1"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:2::1/128", Port: "r1", Replace: true}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::1/48", Via: "2001:db8:2::3"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "2001:db8:9::3"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "fe80::1"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "192.0.2.9"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "10.0.0.0/8", Via: "2001:db8:2::3", Port: "r1"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "2001:db8:2::1"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "fe80::ff:fe00:201", Port: "r1"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "fe80::/64", Port: "r1"}, "InvalidArgument"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Port: "nope"}, "NotFound"},
	} {
		_, err := rc.AddRoute(ctx, c.req)
		if got := fmt.Sprint(statusCode(err)); got != c.code {
			t.Errorf("AddRoute %v: %v, want %s", c.req, err, c.code)
		}
	}
	// The reasons are clear.
	for _, c := range []struct {
		req  *api.AddRouteRequest
		want string
	}{
		{&api.AddRouteRequest{Prefix: "2001:db8:1::/64", Via: "2001:db8:2::3", Replace: true},
			`2001:db8:1::/64 is connected: port "r0" has 2001:db8:1::1/64 on it; connected routes come from the ports' addresses and cannot be added, replaced or deleted`},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "fe80::1"}, "next hop fe80::1 is link-local: name the port it is on"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "192.0.2.9"},
			"next hop 192.0.2.9 is IPv4 but prefix 2001:db8:200::/48 is IPv6: a next hop is of its prefix's family"},
		{&api.AddRouteRequest{Prefix: "2001:db8:200::/48", Via: "fe80::ff:fe00:201", Port: "r1"},
			`next hop fe80::ff:fe00:201 is port "r1"'s own address: a next hop is another node on the link`},
	} {
		if _, err := rc.AddRoute(ctx, c.req); status.Convert(err).Message() != c.want {
			t.Errorf("AddRoute %v: %v\nwant %s", c.req, err, c.want)
		}
	}
	// A static on-link route is static, and can be deleted.
	if r, err := rc.AddRoute(ctx, &api.AddRouteRequest{Prefix: "2001:db8:300::/48", Port: "r1"}); err != nil ||
		r.Route.Kind != "static" || !r.Route.Static || r.Replaced {
		t.Errorf("on-link static route: %v %v", r, err)
	}
	if r, err := rc.AddRoute(ctx, &api.AddRouteRequest{Prefix: "2001:db8:300::/48", Via: "2001:db8:2::2", Replace: true}); err != nil ||
		!r.Replaced {
		t.Errorf("replace: %v %v", r, err)
	}
	if _, err := rc.DeleteRoute(ctx, &api.DeleteRouteRequest{Prefix: "2001:db8:300::/48"}); err != nil {
		t.Error(err)
	}
	if _, err := rc.DeleteRoute(ctx, &api.DeleteRouteRequest{Prefix: "2001:db8:1::/64"}); statusCode(err) != "InvalidArgument" {
		t.Errorf("deleted a connected route: %v", err)
	}
	// A default route, looked up.
	if _, err := rc.AddRoute(ctx, &api.AddRouteRequest{Prefix: "::/0", Via: "2001:db8:2::3"}); err != nil {
		t.Fatal(err)
	}
	lk, err := rc.Lookup(ctx, &api.LookupRequest{Address: "2001:db8:beef::1"})
	if err != nil || lk.Route.Prefix != "::/0" || lk.NextHop != "2001:db8:2::3" || lk.Neighbor.GetState() != "STATIC" || lk.Neighbor.Mac != "02:00:00:00:02:03" {
		t.Errorf("lookup %v %v", lk, err)
	}
	if _, err := rc.DeleteRoute(ctx, &api.DeleteRouteRequest{Prefix: "::/0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Lookup(ctx, &api.LookupRequest{Address: "2001:db8:beef::1"}); statusCode(err) != "NotFound" {
		t.Errorf("lookup after delete: %v", err)
	}
	// Neighbours.
	if _, err := rc.AddNeighbor(ctx, &api.AddNeighborRequest{Address: "192.0.2.9", Mac: "02:00:00:00:01:09", Port: "r0"}); err != nil {
		t.Fatal(err)
	}
	ns, err := rc.ListNeighbors(ctx, &api.ListNeighborsRequest{Port: "r0"})
	if err != nil || len(ns.Neighbors) != 1 || ns.Neighbors[0].Address != "192.0.2.9" || ns.Neighbors[0].State != "STATIC" || ns.Capacity != 4096 {
		t.Errorf("neighbors %v %v", ns, err)
	}
	if _, err := rc.DeleteNeighbor(ctx, &api.DeleteNeighborRequest{Address: "192.0.2.9", Port: "r0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.DeleteNeighbor(ctx, &api.DeleteNeighborRequest{Address: "192.0.2.9", Port: "r0"}); statusCode(err) != "NotFound" {
		t.Errorf("second delete: %v", err)
	}
	if _, err := rc.AddNeighbor(ctx, &api.AddNeighborRequest{Address: "192.0.2.9", Mac: "01:00:00:00:01:09", Port: "r0"}); statusCode(err) != "InvalidArgument" {
		t.Errorf("multicast MAC: %v", err)
	}
	for _, a := range []string{"198.51.100.9", "2001:db8:2::9", "192.0.2.1", "fe80::ff:fe00:101"} {
		if _, err := rc.AddNeighbor(ctx, &api.AddNeighborRequest{Address: a, Mac: "02:00:00:00:01:09", Port: "r0"}); statusCode(err) != "InvalidArgument" {
			t.Errorf("neighbour %s on r0: %v", a, err)
		}
	}
	if _, err := rc.AddNeighbor(ctx, &api.AddNeighborRequest{Address: "fe80::9", Mac: "02:00:00:00:01:09", Port: "r0"}); err != nil {
		t.Errorf("a link-local neighbour: %v", err)
	}
	if _, err := rc.DeleteNeighbor(ctx, &api.DeleteNeighborRequest{Address: "fe80::9", Port: "r0"}); err != nil {
		t.Error(err)
	}
	ns, _ = rc.ListNeighbors(ctx, &api.ListNeighborsRequest{})
	if len(ns.Neighbors) != 2 || ns.Created-ns.Removed != 2 {
		t.Errorf("all neighbours %v", ns)
	}
}

func statusCode(err error) string {
	if err == nil {
		return "OK"
	}
	return status.Code(err).String()
}

// TestMemMTU: a mem port has no device; its mtu key is the port's MTU, as
// routed mode and linerate status see it.
func TestMemMTU(t *testing.T) {
	cfg := strings.Replace(memRouter(1), "name = \"r1\"\ndriver = \"mem\"\n", "name = \"r1\"\ndriver = \"mem\"\nmtu = 1400\n", 1)
	e := enginetest.New(t, cfg, appliance.Options{})
	rc := api.NewRoutingClient(enginetest.Dial(t, e))
	ifs, err := rc.Interfaces(context.Background(), &api.InterfacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	mtus := map[string]int32{}
	for _, i := range ifs.Interfaces {
		mtus[i.Port] = i.Mtu
	}
	if mtus["r0"] != 1500 || mtus["r1"] != 1400 {
		t.Errorf("routed MTUs %v, want r0's default 1500 and r1's 1400", mtus)
	}
	if st := e.Status(); st.Ports[2].Name != "r1" || st.Ports[2].MTU != 1400 {
		t.Errorf("status of r1: %+v", st.Ports[2])
	}
}
