package control

import (
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/linerate/linerate/appliance/control/host"
)

// A call to a service the server does not have goes to the first plugin proxy
// (host.RegisterProxy) that knows the service: an out-of-process plugin's own
// control service, reached through linerate's API. Its messages pass through
// as they are, never decoded.

// frame is a message passed through undecoded.
type frame struct{ b []byte }

// codec is the server's codec: protobuf, and frames as their bytes.
type codec struct{}

func (codec) Marshal(v any) ([]byte, error) {
	if f, ok := v.(*frame); ok {
		return f.b, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, errors.New("control: not a protobuf message")
	}
	return proto.Marshal(m)
}

func (codec) Unmarshal(data []byte, v any) error {
	if f, ok := v.(*frame); ok {
		f.b = append(f.b[:0], data...)
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return errors.New("control: not a protobuf message")
	}
	return proto.Unmarshal(data, m)
}

func (codec) Name() string { return "proto" }

var _ encoding.Codec = codec{}

// proxy forwards a call of an unknown service to the plugin that serves it.
func proxy(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "control: no method")
	}
	service := strings.TrimPrefix(method, "/")
	if i := strings.LastIndexByte(service, '/'); i >= 0 {
		service = service[:i]
	}
	cc := host.Proxy(service)
	if cc == nil {
		return status.Errorf(codes.Unimplemented, "unknown service %s", service)
	}
	ctx := ss.Context()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(codec{}))
	if err != nil {
		return err
	}
	up := make(chan error, 1)
	go func() {
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				if err == io.EOF {
					err = cs.CloseSend()
				}
				up <- err
				return
			}
			if err := cs.SendMsg(&f); err != nil {
				up <- err
				return
			}
		}
	}()
	if md, err := cs.Header(); err == nil {
		_ = ss.SendHeader(md)
	}
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			ss.SetTrailer(cs.Trailer())
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
	}
}
