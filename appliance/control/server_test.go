package control_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/api"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/control/controltest"
	"github.com/linerate/linerate/appliance/stats"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// serve starts srv on a socket in a fresh directory and returns a client.
func serve(t *testing.T, srv *control.Server) (api.ApplianceClient, *grpc.ClientConn, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "linerate", "ctl.sock")
	if _, err := srv.Start("unix:" + sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cc, err := control.Dial("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return api.NewApplianceClient(cc), cc, sock
}

func TestStatusOverUnixSocket(t *testing.T) {
	c, _, sock := serve(t, control.NewServer(controltest.New(), nil))

	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want socket 0660", fi.Mode())
	}
	if di, err := os.Stat(filepath.Dir(sock)); err != nil || di.Mode().Perm()&^0o750 != 0 {
		t.Errorf("socket dir mode %v (%v), want at most 0750", di.Mode(), err)
	}

	r, err := c.Status(ctx(t), &api.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := controltest.Status()
	if r.Version != want.Version || r.ConfigPath != want.ConfigPath || r.State != api.State_STATE_RUNNING {
		t.Errorf("status = %q %q %v", r.Version, r.ConfigPath, r.State)
	}
	if !r.Started.AsTime().Equal(controltest.Started) || r.Uptime.AsDuration() < time.Since(controltest.Started)-time.Minute {
		t.Errorf("started %v uptime %v", r.Started.AsTime(), r.Uptime.AsDuration())
	}
	if len(r.Lcores) != 2 || r.Lcores[1].Id != 1 || r.Lcores[1].Cpu != -1 || !slices.Equal(r.Lcores[1].Pipelines, []string{"edge", "coded"}) {
		t.Errorf("lcores = %v", r.Lcores)
	}
	if len(r.Ports) != 2 {
		t.Fatalf("ports = %v", r.Ports)
	}
	p := r.Ports[1]
	if p.Name != "p1" || p.Driver != "afpacket" || p.RxQueues != 1 || p.TxQueues != 2 || p.Mtu != 9000 ||
		p.Mac != "02:00:00:00:00:02" || p.TimestampSource != "hardware" || p.LinkUp {
		t.Errorf("port p1 = %v", p)
	}
	if len(r.Pipelines) != 2 || r.Pipelines[0].Name != "edge" || !slices.Equal(r.Pipelines[0].Lcores, []int32{0, 1}) ||
		!slices.Equal(r.Pipelines[0].Stages, []string{"classify", "ioam.encap", "forward"}) {
		t.Errorf("pipelines = %v", r.Pipelines)
	}
}

func TestStats(t *testing.T) {
	c, _, _ := serve(t, control.NewServer(controltest.New(), nil))
	r, err := c.Stats(ctx(t), &api.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	snap := controltest.Snapshot()
	if !r.Time.AsTime().Equal(snap.Time) || r.Uptime.AsDuration() != 90*time.Minute {
		t.Errorf("time %v uptime %v", r.Time.AsTime(), r.Uptime.AsDuration())
	}
	if len(r.Ports) != 2 {
		t.Fatalf("ports = %v", r.Ports)
	}
	p0, p1 := r.Ports[0], r.Ports[1]
	if p0.RxPackets != 1000 || p0.RxBytes != 64000 || p0.TxPackets != 990 || p0.TxBytes != 63360 ||
		p0.RxDropped != 1 || p0.TxDropped != 2 || p0.RxErrors != 3 || !p0.LinkUp || p0.TimestampSource != "software" {
		t.Errorf("p0 = %v", p0)
	}
	if p1.Extra["ring_full"] != 7 || p1.Extra["poll_wakeups"] != 11 {
		t.Errorf("p1 extra = %v", p1.Extra)
	}
	if len(r.Stages) != 4 {
		t.Fatalf("stages = %v", r.Stages)
	}
	enc := r.Stages[2]
	if enc.Pipeline != "edge" || enc.Name != "encap" || enc.Kind != "ioam.encap" || enc.Lcore != 2 || enc.Packets != 550 ||
		len(enc.Counters) != 2 || enc.Counters[0].Name != "encapsulated" || enc.Counters[0].Value != 540 ||
		enc.Counters[0].Help == "" || len(enc.Drops) != 1 || enc.Drops[0].Reason != "too_big" || enc.Drops[0].Count != 10 {
		t.Errorf("encap stage = %v", enc)
	}
	if got := dropMap(r.Drops); len(got) != 4 || got["malformed"] != 5 || got["tx_full"] != 2 {
		t.Errorf("drops = %v", got)
	}
	if len(r.Pools) != 2 || r.Pools[0].Size != 4096 || r.Pools[0].InUse != 128 || r.Pools[0].Copies != 3 || r.Pools[1].AllocFailures != 2 {
		t.Errorf("pools = %v", r.Pools)
	}

	if len(r.Lcores) != 2 {
		t.Fatalf("lcores = %v", r.Lcores)
	}
	l := r.Lcores[0]
	if l.Id != 0 || l.Cpu != 2 || l.Loops != 100000 || l.BusyLoops != 2500 || l.Packets != 1150 {
		t.Errorf("lcore 0 = %v", l)
	}
	checkHist(t, "loop gap", l.LoopGap, snap.Lcores[0].Gap, controltest.LoopGaps)
	// The percentiles are bucket midpoints: within 0.4% of the values recorded.
	for _, c := range []struct {
		got, want uint64
	}{{l.LoopGap.P50, 200}, {l.LoopGap.P90, 200}, {l.LoopGap.P99, 2000}, {l.LoopGap.P999, 50_000}, {l.LoopGap.Max, 3_000_000}} {
		if d := float64(c.got) - float64(c.want); d < -0.004*float64(c.want) || d > 0.004*float64(c.want) {
			t.Errorf("loop gap percentile %d, want %d", c.got, c.want)
		}
	}

	if len(r.Histograms) != 2 {
		t.Fatalf("histograms = %v", r.Histograms)
	}
	h := r.Histograms[0]
	if h.Owner != "edge/encap" || h.Name != "latency" || h.Unit != "ns" || h.Help == "" {
		t.Errorf("histogram = %v", h)
	}
	checkHist(t, "latency", h.Histogram, snap.Histogram[0].Hist, controltest.Latencies)
}

// checkHist compares a reply's histogram with the snapshot it came from and the
// values recorded into it.
func checkHist(t *testing.T, what string, got *api.Histogram, want *stats.HistSnapshot, recorded []struct{ Value, N uint64 }) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no histogram", what)
	}
	if got.Count != want.Count || got.Sum != want.Sum || got.Max != want.Max || got.Mean != want.Mean() ||
		got.P50 != want.Quantile(0.5) || got.P90 != want.Quantile(0.9) || got.P99 != want.Quantile(0.99) || got.P999 != want.Quantile(0.999) {
		t.Errorf("%s: %v", what, got)
	}
	if len(got.Buckets) != len(recorded) {
		t.Fatalf("%s: %d buckets, want %d: %v", what, len(got.Buckets), len(recorded), got.Buckets)
	}
	for i, b := range got.Buckets {
		v := recorded[i]
		// Each value's bucket ends at or above it, within a bucket's width (< v/128).
		if b.Count != v.N || b.Le < v.Value || b.Le-v.Value >= v.Value/128 {
			t.Errorf("%s: bucket %d = (le %d, %d), want %d values of %d", what, i, b.Le, b.Count, v.N, v.Value)
		}
	}
}

func dropMap(d []*api.DropCount) map[string]uint64 {
	m := map[string]uint64{}
	for _, c := range d {
		m[c.Reason] += c.Count
	}
	return m
}

func TestStatsFilter(t *testing.T) {
	c, _, _ := serve(t, control.NewServer(controltest.New(), nil))
	r, err := c.Stats(ctx(t), &api.StatsRequest{Pipelines: []string{"coded"}, Ports: []string{"p1"}, OmitBuckets: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Ports) != 1 || r.Ports[0].Name != "p1" {
		t.Errorf("ports = %v", r.Ports)
	}
	if len(r.Stages) != 1 || r.Stages[0].Name != "encoder" {
		t.Errorf("stages = %v", r.Stages)
	}
	// Only lcore 1 runs "coded"; drops are that pipeline's own.
	if len(r.Lcores) != 1 || r.Lcores[0].Id != 1 {
		t.Errorf("lcores = %v", r.Lcores)
	}
	if got := dropMap(r.Drops); len(got) != 2 || got["no_buffer"] != 5 || got["malformed"] != 1 {
		t.Errorf("drops = %v", got)
	}
	if len(r.Histograms) != 1 || r.Histograms[0].Owner != "coded/encoder" {
		t.Errorf("histograms = %v", r.Histograms)
	}
	if g := r.Lcores[0].LoopGap; g.Count != 1000 || g.P99 == 0 || len(g.Buckets) != 0 {
		t.Errorf("omit_buckets: loop gap = %v", g)
	}

	for _, req := range []*api.StatsRequest{{Pipelines: []string{"nope"}}, {Ports: []string{"p9"}}} {
		_, err := c.Stats(ctx(t), req)
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "nope") && !strings.Contains(err.Error(), "p9") {
			t.Errorf("Stats(%v) = %v, want NOT_FOUND naming it", req, err)
		}
	}
}

func TestStatsBeforeSnapshot(t *testing.T) {
	src := &controltest.Source{}
	src.Set(nil, appliance.Status{State: appliance.StateStarting})
	c, _, _ := serve(t, control.NewServer(src, nil))
	if _, err := c.Stats(ctx(t), &api.StatsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("Stats with no snapshot = %v, want UNAVAILABLE", err)
	}
	r, err := c.Status(ctx(t), &api.StatusRequest{})
	if err != nil || r.State != api.State_STATE_STARTING || r.Started != nil {
		t.Errorf("Status = %v, %v", r, err)
	}
}

type panicky struct{ controltest.Source }

func (*panicky) Status() appliance.Status { panic("boom") }

func TestPanicIsInternal(t *testing.T) {
	c, _, _ := serve(t, control.NewServer(&panicky{}, nil))
	for range 2 { // the server survives the first
		if _, err := c.Status(ctx(t), &api.StatusRequest{}); status.Code(err) != codes.Internal {
			t.Fatalf("Status = %v, want INTERNAL", err)
		}
	}
}

func TestHealthAndReflection(t *testing.T) {
	srv := control.NewServer(controltest.New(), nil)
	_, cc, _ := serve(t, srv)
	h := healthpb.NewHealthClient(cc)
	for _, svc := range []string{"", "linerate.v1.Appliance"} {
		r, err := h.Check(ctx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v, %v", svc, r, err)
		}
	}

	st, err := reflectpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"linerate.v1.Appliance", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
	st.CloseSend()
}

func TestStopRemovesSocket(t *testing.T) {
	srv := control.NewServer(controltest.New(), nil)
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	served := make(chan error, 1)
	go func() { served <- srv.Serve("unix:" + sock) }()
	cc, err := control.Dial("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := api.NewApplianceClient(cc).Status(ctx(t), &api.StatusRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := <-served; err != nil {
		t.Errorf("Serve after Stop = %v, want nil", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Stop: %v", err)
	}
	if _, err := srv.Start("unix:" + sock); err == nil {
		t.Error("Start after Stop succeeded")
	}
}

func TestSocketTakeover(t *testing.T) {
	dir := t.TempDir()

	// A socket left by a process that died is taken over.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	srv := control.NewServer(controltest.New(), nil)
	t.Cleanup(srv.Stop)
	if _, err := srv.Start("unix:" + stale); err != nil {
		t.Fatalf("stale socket: %v", err)
	}

	// A live one is not, nor is a file that is no socket.
	other := control.NewServer(controltest.New(), nil)
	t.Cleanup(other.Stop)
	if _, err := other.Start("unix:" + stale); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("socket in use: %v, want EADDRINUSE", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("keep me"), 0o600)
	if _, err := other.Start("unix:" + file); err == nil {
		t.Error("listened over a regular file")
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Error("regular file clobbered")
	}
}

func TestListenPolicy(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:9999", "", "nonsense", "unix:"} {
		srv := control.NewServer(controltest.New(), nil)
		if a, err := srv.Start(addr); err == nil {
			t.Errorf("Start(%q) without TLS listened on %v", addr, a)
		}
		srv.Stop()
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		srv := control.NewServer(controltest.New(), nil)
		a, err := srv.Start(addr)
		if addr == "[::1]:0" && err != nil && strings.Contains(err.Error(), "cannot assign") {
			srv.Stop()
			continue // no IPv6 loopback here
		}
		if err != nil {
			t.Errorf("Start(%q) = %v", addr, err)
			srv.Stop()
			continue
		}
		cc, err := control.Dial(a.String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.NewApplianceClient(cc).Status(ctx(t), &api.StatusRequest{}); err != nil {
			t.Errorf("Status over %s: %v", a, err)
		}
		cc.Close()
		srv.Stop()
	}
}

// pki is a throwaway CA with a server and a client certificate, in files.
type pki struct {
	dir                                              string
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "linerate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p.ca = p.write(t, "ca.pem", "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(key)
		return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+".key", "PRIVATE KEY", kder)
	}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	f := filepath.Join(p.dir, name)
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	srv := control.NewServer(controltest.New(), nil, control.ServeOptions{TLSCert: p.serverCert, TLSKey: p.serverKey, ClientCA: p.ca})
	t.Cleanup(srv.Stop)
	a, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	call := func(opts ...grpc.DialOption) error {
		cc, err := control.Dial(a.String(), opts...)
		if err != nil {
			return err
		}
		defer cc.Close()
		_, err = api.NewApplianceClient(cc).Status(ctx(t), &api.StatusRequest{})
		return err
	}
	good, err := control.ClientTLS(p.ca, p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(grpc.WithTransportCredentials(good)); err != nil {
		t.Errorf("mTLS client: %v", err)
	}
	noCert, _ := control.ClientTLS(p.ca, "", "")
	if err := call(grpc.WithTransportCredentials(noCert)); status.Code(err) != codes.Unavailable {
		t.Errorf("client without certificate: %v, want UNAVAILABLE", err)
	}
	if err := call(); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want UNAVAILABLE", err)
	}
	wrongCA, _ := control.ClientTLS(p.clientCert, p.clientCert, p.clientKey) // trusts the wrong root
	if err := call(grpc.WithTransportCredentials(wrongCA)); status.Code(err) != codes.Unavailable {
		t.Errorf("client trusting another CA: %v, want UNAVAILABLE", err)
	}
}

func TestTLSAllowsNonLoopback(t *testing.T) {
	p := newPKI(t)
	srv := control.NewServer(controltest.New(), nil, control.ServeOptions{TLSCert: p.serverCert, TLSKey: p.serverKey})
	t.Cleanup(srv.Stop)
	a, err := srv.Start("0.0.0.0:0") // bound on every interface; the test talks over loopback only
	if err != nil {
		t.Fatal(err)
	}
	creds, _ := control.ClientTLS(p.ca, "", "")
	cc, err := control.Dial(net.JoinHostPort("127.0.0.1", portOf(a)), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := api.NewApplianceClient(cc).Status(ctx(t), &api.StatusRequest{}); err != nil {
		t.Errorf("TLS (no client certs): %v", err)
	}
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

func TestTLSMaterialErrors(t *testing.T) {
	p := newPKI(t)
	if err := os.Chmod(p.serverKey, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]control.ServeOptions{
		"key readable by others": {TLSCert: p.serverCert, TLSKey: p.serverKey},
		"no key":                 {TLSCert: p.serverCert},
		"ca only":                {ClientCA: p.ca},
		"missing cert":           {TLSCert: filepath.Join(p.dir, "nope.pem"), TLSKey: p.clientKey},
	} {
		srv := control.NewServer(controltest.New(), nil, o)
		if _, err := srv.Start("127.0.0.1:0"); err == nil {
			t.Errorf("%s: Start succeeded", name)
		}
		srv.Stop()
	}
}

func TestCertificateRotation(t *testing.T) {
	p := newPKI(t)
	srv := control.NewServer(controltest.New(), nil, control.ServeOptions{TLSCert: p.serverCert, TLSKey: p.serverKey})
	t.Cleanup(srv.Stop)
	a, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		conn, err := tls.Dial("tcp", a.String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if s := serial(); s != 2 {
		t.Fatalf("serial %d, want 2", s)
	}
	// Put the client's pair in place of the server's; the next handshake uses it.
	for _, f := range [][2]string{{p.clientCert, p.serverCert}, {p.clientKey, p.serverKey}} {
		b, _ := os.ReadFile(f[0])
		os.WriteFile(f[1]+".new", b, 0o600)
		os.Rename(f[1]+".new", f[1])
		future := time.Now().Add(time.Minute)
		os.Chtimes(f[1], future, future)
	}
	if s := serial(); s != 3 {
		t.Errorf("after rotation serial %d, want 3", s)
	}
}
