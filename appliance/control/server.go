package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/linerate/linerate/appliance/api"
)

// Errors a service returns wrapped with context; the server maps them, and
// io/fs's and context's own, to gRPC status codes. Anything else is INTERNAL.
var (
	ErrNotFound    = errors.New("not found")
	ErrExists      = errors.New("already exists")
	ErrInvalid     = errors.New("invalid argument")
	ErrUnavailable = errors.New("unavailable")
)

// stopGrace bounds a graceful stop: streams (trace records) may never end.
const stopGrace = 5 * time.Second

// Server is the control plane's gRPC server. Plugins' services join the
// Appliance service through RegisterServices, before the first Serve or Start.
type Server struct {
	log    *slog.Logger
	grpc   *grpc.Server
	health *health.Server
	tls    bool
	mtls   bool
	err    error // from the TLS material, reported by Serve and Start

	mu      sync.Mutex
	stopped bool
}

// NewServer makes a server for src with the Appliance, health and reflection
// services registered. At most one ServeOptions may be given, to turn on TLS.
func NewServer(src Source, log *slog.Logger, opts ...ServeOptions) *Server {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{log: log, health: health.NewServer()}
	var gopts []grpc.ServerOption
	switch {
	case len(opts) > 1:
		s.err = errors.New("control: more than one ServeOptions")
	case len(opts) == 1 && opts[0].tlsEnabled():
		cfg, err := serverTLS(opts[0], log)
		if err != nil {
			s.err = fmt.Errorf("control TLS: %w", err)
		} else {
			s.tls, s.mtls = true, opts[0].ClientCA != ""
			gopts = append(gopts, grpc.Creds(credentials.NewTLS(cfg)))
		}
	}
	gopts = append(gopts,
		grpc.ChainUnaryInterceptor(s.unary),
		grpc.ChainStreamInterceptor(s.stream),
		grpc.ForceServerCodec(codec{}),
		grpc.UnknownServiceHandler(proxy),
	)
	s.grpc = grpc.NewServer(gopts...)
	api.RegisterApplianceServer(s.grpc, &applianceService{src: src})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	return s
}

// Serve listens on listen ("unix:/path" or "host:port") and serves until Stop,
// when it returns nil. A TCP address must be loopback unless TLS is configured.
func (s *Server) Serve(listen string) error {
	l, err := s.listen(listen)
	if err != nil {
		return err
	}
	return s.serve(l, listen)
}

// Start listens on listen as Serve does, then serves in the background, so a
// bad address fails here. It returns the bound address (useful with port 0).
func (s *Server) Start(listen string) (net.Addr, error) {
	l, err := s.listen(listen)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := s.serve(l, listen); err != nil {
			s.log.Error("control: serve", "addr", listen, "err", err)
		}
	}()
	return l.Addr(), nil
}

func (s *Server) serve(l net.Listener, listen string) error {
	s.log.Info("control: serving", "addr", listen, "tls", s.tls)
	if err := s.grpc.Serve(l); err != nil {
		return fmt.Errorf("control %s: %w", listen, err)
	}
	return nil
}

func (s *Server) listen(listen string) (net.Listener, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return nil, grpc.ErrServerStopped
	}
	network, address, err := parseAddr(listen)
	if err != nil {
		return nil, fmt.Errorf("control address: %w", err)
	}
	var l net.Listener
	if network == "unix" {
		l, err = listenUnix(address)
	} else {
		host, _, _ := net.SplitHostPort(address)
		if !isLoopback(host) && !s.tls {
			return nil, fmt.Errorf("control address %s is not loopback: configure TLS to listen there", listen)
		}
		if !isLoopback(host) && !s.mtls {
			s.log.Warn("control: listening beyond loopback without client certificates", "addr", listen)
		}
		l, err = net.Listen(network, address)
	}
	if err != nil {
		return nil, fmt.Errorf("control listen %s: %w", listen, err)
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(api.Appliance_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return l, nil
}

// Stop tells health watchers the server is going, lets running calls finish for
// a few seconds, then closes every connection and listener (removing sockets).
func (s *Server) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopGrace):
		s.log.Warn("control: calls still running; closing them")
		s.grpc.Stop()
		<-done
	}
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("control: panic", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, status.Error(codes.Internal, "internal error")
		}
		err = toStatus(err)
		s.log.Debug("control: call", "method", info.FullMethod, "code", status.Code(err), "took", time.Since(start))
	}()
	return h(ctx, req)
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("control: panic", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, "internal error")
		}
		err = toStatus(err)
		s.log.Debug("control: stream", "method", info.FullMethod, "code", status.Code(err), "took", time.Since(start))
	}()
	return h(srv, ss)
}

// toStatus gives err a gRPC code; an error that already has one keeps it.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, ErrNotFound), errors.Is(err, fs.ErrNotExist):
		code = codes.NotFound
	case errors.Is(err, ErrExists), errors.Is(err, fs.ErrExist):
		code = codes.AlreadyExists
	case errors.Is(err, ErrInvalid), errors.Is(err, fs.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, fs.ErrPermission):
		code = codes.PermissionDenied
	case errors.Is(err, errors.ErrUnsupported):
		code = codes.Unimplemented
	}
	return status.Error(code, err.Error())
}
