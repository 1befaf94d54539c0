package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// parseAddr splits a control address into a network and an address for net.Listen
// and net.Dial: "unix:/path" (or "unix:///path") is a unix socket, anything else
// "host:port" over TCP.
func parseAddr(s string) (network, address string, err error) {
	if s == "" {
		return "", "", errors.New("empty address")
	}
	if rest, ok := strings.CutPrefix(s, "unix:"); ok {
		if p, ok := strings.CutPrefix(rest, "//"); ok {
			rest = p // unix:///abs — the gRPC spelling
		}
		if rest == "" {
			return "", "", fmt.Errorf("%q: no socket path", s)
		}
		return "unix", filepath.Clean(rest), nil
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		return "", "", fmt.Errorf("%q: want unix:/path or host:port: %w", s, err)
	}
	return "tcp", s, nil
}

// isLoopback reports whether host names only loopback addresses. An empty host
// (all interfaces) is not loopback; a name other than localhost is resolved.
func isLoopback(host string) bool {
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true // RFC 6761 §6.3
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}

// listenUnix makes the socket's directory (0750), takes over a stale socket left
// by a process that died, and leaves the socket at mode 0660: the socket file's
// permissions are the access control.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process serves on it: %w", path, syscall.EADDRINUSE)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return l, nil
}

// Dial connects a client to a control address ("unix:/path" or "host:port").
// The connection is plaintext unless opts carry transport credentials (see
// ClientTLS); it is made lazily, on the first call.
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	network, address, err := parseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("control address: %w", err)
	}
	var d net.Dialer
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, address)
		}),
	}
	if network == "unix" {
		// A path is no authority; TLS over a socket then checks "localhost".
		base = append(base, grpc.WithAuthority("localhost"))
	}
	cc, err := grpc.NewClient("passthrough:///"+address, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return cc, nil
}
