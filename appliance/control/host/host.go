// Package host is where a plugin's control side plugs in: the gRPC services
// and Prometheus collectors that plugin packages register from init, and Host,
// the engine as they see it. The control plane owns it: appliance/control
// adapts the engine to Host and registers every service on its server, so the
// engine itself knows nothing of gRPC or Prometheus.
package host

import (
	"log/slog"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/plugins"
)

// StageRef is one running stage instance, as a control service sees it.
type StageRef struct {
	Pipeline string
	Name     string
	Kind     string
	Lcore    int // engine lcore index: pass it to Host.Do
	Stage    plugins.Stage
}

// Host is what a plugin's control service may ask of the engine. Services run
// on control goroutines: they reach a stage's lcore-owned state only through Do
// (run on the lcore, between loops) or through what the stage publishes
// atomically (export rings, snapshots).
type Host interface {
	Instances(kind string) []StageRef // "" for every kind
	Do(lcore int, fn func()) error
	Synchronize()
	Clock() clock.Clock
	Logger() *slog.Logger
}

// Service registers a plugin's gRPC services on the control server.
type Service func(s *grpc.Server, h Host)

var (
	services   named[Service]
	collectors named[Collector]
)

// RegisterService adds a plugin's control service; plugin packages call it from
// init. Every engine with a control server registers it.
func RegisterService(name string, f Service) { services.add(name, f) }

// Services lists the registered services, in name order.
func Services() []Service { return services.sorted() }

// ProxyFunc finds the connection that serves a gRPC service ("pkg.Service"),
// or nil: an out-of-process plugin's own control service.
type ProxyFunc func(service string) grpc.ClientConnInterface

var proxies named[ProxyFunc]

// RegisterProxy adds a resolver for services the control server does not
// have; it forwards their calls, undecoded, to the connection f gives.
func RegisterProxy(name string, f ProxyFunc) { proxies.add(name, f) }

// Proxy is the connection of the first proxy that serves service, or nil.
func Proxy(service string) grpc.ClientConnInterface {
	for _, f := range proxies.sorted() {
		if cc := f(service); cc != nil {
			return cc
		}
	}
	return nil
}

// Collector makes a plugin's Prometheus collector for the engine h: series the
// engine's snapshot does not carry, such as one per STAMP session. Collect runs
// on the scraping goroutine and reaches lcore-owned state only as a Service
// does, through h.
type Collector func(h Host) prometheus.Collector

// RegisterCollector adds a plugin's Prometheus collector; plugin packages call
// it from init. Every engine that serves /metrics exports it.
func RegisterCollector(name string, f Collector) { collectors.add(name, f) }

// Collectors makes every registered plugin collector for the engine h, in name
// order.
func Collectors(h Host) []prometheus.Collector {
	var out []prometheus.Collector
	for _, f := range collectors.sorted() {
		out = append(out, f(h))
	}
	return out
}

// named holds plugin hooks by name; plugin packages fill it from init.
type named[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

func (r *named[T]) add(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]T{}
	}
	r.m[name] = v
}

// sorted returns the hooks in name order.
func (r *named[T]) sorted() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]T, 0, len(names))
	for _, n := range names {
		out = append(out, r.m[n])
	}
	return out
}
