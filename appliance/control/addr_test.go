package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestParseAddr(t *testing.T) {
	for _, c := range []struct{ in, network, address string }{
		{"unix:/run/linerate/linerate.sock", "unix", "/run/linerate/linerate.sock"},
		{"unix:///run/linerate/linerate.sock", "unix", "/run/linerate/linerate.sock"},
		{"unix:rel/ctl.sock", "unix", "rel/ctl.sock"},
		{"127.0.0.1:7001", "tcp", "127.0.0.1:7001"},
		{"[::1]:7001", "tcp", "[::1]:7001"},
		{"localhost:7001", "tcp", "localhost:7001"},
	} {
		n, a, err := parseAddr(c.in)
		if err != nil || n != c.network || a != c.address {
			t.Errorf("parseAddr(%q) = %q %q %v", c.in, n, a, err)
		}
	}
	for _, in := range []string{"", "unix:", "unix://", "localhost", "/run/x.sock", "1.2.3.4"} {
		if _, _, err := parseAddr(in); err == nil {
			t.Errorf("parseAddr(%q) accepted", in)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.3.4.5": true, "::1": true, "localhost": true, "LocalHost": true,
		"": false, "0.0.0.0": false, "::": false, "192.0.2.1": false, "10.0.0.1": false,
	} {
		if got := isLoopback(host); got != want {
			t.Errorf("isLoopback(%q) = %v", host, got)
		}
	}
}

func TestToStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("session 7: %w", ErrNotFound), codes.NotFound},
		{fmt.Errorf("open: %w", fs.ErrNotExist), codes.NotFound},
		{fmt.Errorf("x: %w", ErrExists), codes.AlreadyExists},
		{fmt.Errorf("x: %w", ErrInvalid), codes.InvalidArgument},
		{fmt.Errorf("x: %w", ErrUnavailable), codes.Unavailable},
		{fs.ErrPermission, codes.PermissionDenied},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{errors.ErrUnsupported, codes.Unimplemented},
		{errors.New("disk on fire"), codes.Internal},
		{status.Error(codes.ResourceExhausted, "full"), codes.ResourceExhausted},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Aborted, "x")), codes.Aborted},
	} {
		got := toStatus(c.err)
		if status.Code(got) != c.code {
			t.Errorf("toStatus(%v) = %v, want %v", c.err, status.Code(got), c.code)
		}
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) != nil")
	}
}
