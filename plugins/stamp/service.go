package stamp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/plugins/stamp/api"
	"github.com/linerate/linerate/plugins/stamp/api/srv6pm"
)

func init() {
	host.RegisterService("stamp", func(s *grpc.Server, h host.Host) {
		sv := &service{h: h}
		api.RegisterStampServer(s, sv)
		srv6pm.RegisterSTAMPSessionSenderServiceServer(s, &seedSender{sv: sv})
		srv6pm.RegisterSTAMPSessionReflectorServiceServer(s, &seedReflector{sv: sv})
	})
}

// service is linerate's STAMP control service (plugins/stamp/api/stamp.proto).
type service struct {
	api.UnimplementedStampServer
	h host.Host
}

// registry finds the engine's STAMP registry through its stages.
func (sv *service) registry() (*Registry, error) {
	for _, kind := range []string{"stamp.sender", "stamp.reflector", "stamp.collector"} {
		for _, ref := range sv.h.Instances(kind) {
			switch st := ref.Stage.(type) {
			case *sender:
				return st.reg, nil
			case *reflector:
				return st.reg, nil
			case *collector:
				return st.reg, nil
			}
		}
	}
	return nil, status.Error(codes.FailedPrecondition, "this engine has no STAMP stage (stamp.sender, stamp.reflector, stamp.collector)")
}

// grpcErr maps registry errors to gRPC codes.
func grpcErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNoStage):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrExists), errors.Is(err, ErrInitialized):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, ErrRunning), errors.Is(err, ErrNotRunning), errors.Is(err, ErrNotInitialized):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrTooMany):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

func ssid16(v uint32) (uint16, error) {
	if v == 0 || v > 65535 {
		return 0, status.Errorf(codes.InvalidArgument, "ssid %d: 1..65535", v)
	}
	return uint16(v), nil
}

func parseAddrs(in []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range in {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func optAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	return netip.ParseAddr(s)
}

func (sv *service) Init(ctx context.Context, req *api.StampInitRequest) (*api.StampInitReply, error) {
	r, err := sv.registry()
	if err != nil {
		return nil, err
	}
	if req.Port > 65535 {
		return nil, status.Errorf(codes.InvalidArgument, "port %d", req.Port)
	}
	p := initParams{port: uint16(req.Port), source: req.Source}
	switch req.Role {
	case api.StampRole_STAMP_ROLE_SENDER:
		err = r.initTx(p, false)
	case api.StampRole_STAMP_ROLE_REFLECTOR:
		err = r.initRf(p, false)
	default:
		return nil, status.Error(codes.InvalidArgument, "role: sender or reflector")
	}
	return &api.StampInitReply{}, grpcErr(err)
}

func (sv *service) Reset(ctx context.Context, req *api.StampResetRequest) (*api.StampResetReply, error) {
	r, err := sv.registry()
	if err != nil {
		return nil, err
	}
	switch req.Role {
	case api.StampRole_STAMP_ROLE_SENDER:
		return &api.StampResetReply{Destroyed: uint32(r.resetTx(sv.h))}, nil
	case api.StampRole_STAMP_ROLE_REFLECTOR:
		return &api.StampResetReply{Destroyed: uint32(r.resetRf(sv.h))}, nil
	}
	return nil, status.Error(codes.InvalidArgument, "role: sender or reflector")
}

// senderFromProto converts a session; the key stays a name for the registry.
func senderFromProto(p *api.StampSenderSession) (SenderSession, error) {
	var c SenderSession
	id, err := ssid16(p.Ssid)
	if err != nil {
		return c, err
	}
	c.SSID, c.Stage = id, p.Stage
	if c.Src, err = optAddr(p.Src); err != nil {
		return c, fmt.Errorf("src: %w", err)
	}
	if c.Reflector, err = optAddr(p.Reflector); err != nil {
		return c, fmt.Errorf("reflector: %w", err)
	}
	if c.Segments, err = parseAddrs(p.Segments); err != nil {
		return c, fmt.Errorf("segments: %w", err)
	}
	if !c.Reflector.IsValid() && len(c.Segments) > 0 {
		c.Reflector = c.Segments[len(c.Segments)-1]
	}
	if p.SrcPort > 65535 || p.ReflectorPort > 65535 || p.HopLimit > 255 || p.Dscp > 63 {
		return c, errors.New("a port, the hop limit or the DSCP is out of range")
	}
	c.SrcPort, c.ReflectorPort, c.HopLimit, c.DSCP = uint16(p.SrcPort), uint16(p.ReflectorPort), uint8(p.HopLimit), uint8(p.Dscp)
	c.Interval, c.Count, c.Duration = time.Duration(p.IntervalNs), p.Count, time.Duration(p.DurationNs)
	f, err := parseFormat(p.Timestamp)
	if err != nil {
		return c, err
	}
	c.PTP = f == formatPTP
	c.Auth, c.HMACTLV, c.Padding, c.Stateful, c.Records = p.Authenticated, p.HmacTlv, int(p.Padding), p.StatefulReflector, int(p.Records)
	if err := parseTLVNames(p.Tlvs, &c.TLVs); err != nil {
		return c, err
	}
	if p.CosDscp != nil {
		if *p.CosDscp > 63 {
			return c, errors.New("cos_dscp: 0..63")
		}
		c.TLVs.CoS, c.TLVs.CoSDSCP = true, uint8(*p.CosDscp)
	}
	if c.TLVs.ReturnPath, err = parseAddrs(p.ReturnPath); err != nil {
		return c, fmt.Errorf("return_path: %w", err)
	}
	if p.ReturnControlCode != nil {
		cc := *p.ReturnControlCode
		c.TLVs.ReturnControlCode = &cc
	}
	return c, nil
}

func reflectorFromProto(p *api.StampReflectorSession) (ReflectorSession, error) {
	var c ReflectorSession
	id, err := ssid16(p.Ssid)
	if err != nil {
		return c, err
	}
	c.SSID, c.Stage, c.Stateful, c.Auth = id, p.Stage, p.Stateful, p.Authenticated
	if c.Sender, err = optAddr(p.Sender); err != nil {
		return c, fmt.Errorf("sender: %w", err)
	}
	if c.Source, err = optAddr(p.Source); err != nil {
		return c, fmt.Errorf("source: %w", err)
	}
	if c.ReturnPath, err = parseAddrs(p.ReturnPath); err != nil {
		return c, fmt.Errorf("return_path: %w", err)
	}
	switch p.Timestamp {
	case "", "mirror":
	default:
		f, err := parseFormat(p.Timestamp)
		if err != nil {
			return c, err
		}
		ptp := f == formatPTP
		c.PTP = &ptp
	}
	return c, nil
}

func (sv *service) CreateStampSession(ctx context.Context, req *api.CreateStampSessionRequest) (*api.StampSessionReply, error) {
	r, err := sv.registry()
	if err != nil {
		return nil, err
	}
	switch {
	case req.GetSender() != nil:
		c, err := senderFromProto(req.GetSender())
		if err != nil {
			return nil, grpcErr(err)
		}
		s, err := r.createSender(c, req.GetSender().Key, req.Start)
		if err != nil {
			return nil, grpcErr(err)
		}
		return &api.StampSessionReply{Session: txInfo(s)}, nil
	case req.GetReflector() != nil:
		c, err := reflectorFromProto(req.GetReflector())
		if err != nil {
			return nil, grpcErr(err)
		}
		s, err := r.createReflector(c, req.GetReflector().Key, req.Start)
		if err != nil {
			return nil, grpcErr(err)
		}
		return &api.StampSessionReply{Session: rfInfo(s)}, nil
	}
	return nil, status.Error(codes.InvalidArgument, "a sender or a reflector session is required")
}

func txInfo(s *txSession) *api.StampSessionInfo {
	return &api.StampSessionInfo{Role: api.StampRole_STAMP_ROLE_SENDER, Ssid: uint32(s.id), Stage: s.stage, Running: s.running(),
		Description: s.describe(), Sent: s.sent.Load(), FromConfig: !s.fromAPI}
}

func rfInfo(s *rfSession) *api.StampSessionInfo {
	mode := "stateless"
	if s.cfg.Stateful {
		mode = "stateful"
	}
	d := fmt.Sprintf("STAMP reflector session %d (%s", s.id, mode)
	if s.cfg.Sender.IsValid() {
		d += ", sender " + s.cfg.Sender.String()
	}
	if len(s.cfg.ReturnPath) > 0 {
		d += fmt.Sprintf(", return path %v", s.cfg.ReturnPath)
	}
	if s.cfg.Auth {
		d += ", authenticated"
	}
	return &api.StampSessionInfo{Role: api.StampRole_STAMP_ROLE_REFLECTOR, Ssid: uint32(s.id), Stage: s.stage, Running: s.running.Load(),
		Description: d + ")", Received: s.received.Load(), Replied: s.replied.Load(), FromConfig: !s.fromAPI}
}

// op runs a start, stop or destroy on the session the ref names.
func (sv *service) op(ref *api.StampSessionRef, tx func(*Registry, uint16) (*txSession, error),
	rf func(*Registry, uint16) (*rfSession, error)) (*api.StampSessionReply, error) {
	r, err := sv.registry()
	if err != nil {
		return nil, err
	}
	id, err := ssid16(ref.Ssid)
	if err != nil {
		return nil, err
	}
	switch ref.Role {
	case api.StampRole_STAMP_ROLE_SENDER:
		s, err := tx(r, id)
		if err != nil {
			return nil, grpcErr(err)
		}
		return &api.StampSessionReply{Session: txInfo(s)}, nil
	case api.StampRole_STAMP_ROLE_REFLECTOR:
		s, err := rf(r, id)
		if err != nil {
			return nil, grpcErr(err)
		}
		return &api.StampSessionReply{Session: rfInfo(s)}, nil
	}
	return nil, status.Error(codes.InvalidArgument, "role: sender or reflector")
}

func (sv *service) StartStampSession(ctx context.Context, ref *api.StampSessionRef) (*api.StampSessionReply, error) {
	return sv.op(ref, (*Registry).startTx, (*Registry).startRf)
}

func (sv *service) StopStampSession(ctx context.Context, ref *api.StampSessionRef) (*api.StampSessionReply, error) {
	return sv.op(ref, (*Registry).stopTx, (*Registry).stopRf)
}

func (sv *service) DestroyStampSession(ctx context.Context, ref *api.StampSessionRef) (*api.StampSessionReply, error) {
	return sv.op(ref,
		func(r *Registry, id uint16) (*txSession, error) { return r.destroyTx(id, sv.h) },
		func(r *Registry, id uint16) (*rfSession, error) { return r.destroyRf(id, sv.h) })
}

func (sv *service) ListStampSessions(ctx context.Context, _ *api.ListStampSessionsRequest) (*api.ListStampSessionsReply, error) {
	r, err := sv.registry()
	if err != nil {
		return nil, err
	}
	out := &api.ListStampSessionsReply{}
	for _, s := range r.txSessions() {
		out.Sessions = append(out.Sessions, txInfo(s))
	}
	for _, s := range r.rfSessions() {
		out.Sessions = append(out.Sessions, rfInfo(s))
	}
	return out, nil
}

// maxRecordsPerReply bounds one reply.
const maxRecordsPerReply = 65536

func (sv *service) results(s *txSession, max int, metricsOnly bool) *api.StampSessionResults {
	out := &api.StampSessionResults{Ssid: uint32(s.id)}
	if !metricsOnly {
		if max <= 0 || max > maxRecordsPerReply {
			max = maxRecordsPerReply
		}
		for _, r := range s.drain(max) {
			out.Records = append(out.Records, RecordProto(&r))
		}
	}
	m := metricsAt(sv.h, s)
	out.Metrics = MetricsProto(&m)
	return out
}

func (sv *service) GetStampSessionResults(ctx context.Context, req *api.GetStampSessionResultsRequest) (*api.StampSessionResults, error) {
	r, err := sv.registry()
	if err != nil {
		return nil, err
	}
	id, err := ssid16(req.Ssid)
	if err != nil {
		return nil, err
	}
	s, err := r.tx1(id)
	if err != nil {
		return nil, grpcErr(err)
	}
	return sv.results(s, int(req.MaxRecords), req.MetricsOnly), nil
}

func (sv *service) StreamStampSessionResults(req *api.StreamStampSessionResultsRequest, stream grpc.ServerStreamingServer[api.StampSessionResults]) error {
	r, err := sv.registry()
	if err != nil {
		return err
	}
	if req.Ssid != 0 {
		id, err := ssid16(req.Ssid)
		if err != nil {
			return err
		}
		if _, err := r.tx1(id); err != nil {
			return grpcErr(err)
		}
	}
	every := time.Duration(req.MetricsIntervalMs) * time.Millisecond
	if every <= 0 {
		every = time.Second
	}
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	lastMetrics := time.Now()
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-poll.C:
			withMetrics := now.Sub(lastMetrics) >= every
			if withMetrics {
				lastMetrics = now
			}
			for _, s := range r.txSessions() {
				if req.Ssid != 0 && uint32(s.id) != req.Ssid {
					continue
				}
				if !withMetrics && (req.MetricsOnly || s.waiting() == 0) {
					continue
				}
				out := &api.StampSessionResults{Ssid: uint32(s.id)}
				if !req.MetricsOnly {
					for _, rec := range s.drain(maxRecordsPerReply) {
						out.Records = append(out.Records, RecordProto(&rec))
					}
				}
				if withMetrics {
					m := metricsAt(sv.h, s)
					out.Metrics = MetricsProto(&m)
				}
				if err := stream.Send(out); err != nil {
					return err
				}
			}
			if req.Ssid != 0 {
				if _, err := r.tx1(uint16(req.Ssid)); err != nil {
					return grpcErr(err) // destroyed while streaming
				}
			}
		}
	}
}

// RecordProto converts a record for the control API.
func RecordProto(r *Record) *api.StampRecord {
	return &api.StampRecord{Ssid: uint32(r.SSID), Seq: r.Seq, ReflectorSeq: r.ReflectorSeq,
		T1Ns: r.T1, T2Ns: r.T2, T3Ns: r.T3, T4Ns: r.T4, T1Wire: r.T1Wire, T2Wire: r.T2Wire, T3Wire: r.T3Wire,
		SenderErrorEstimate: uint32(r.SenderErr), ReflectorErrorEstimate: uint32(r.ReflectorErr),
		SenderTtl: uint32(r.SenderTTL), HopLimit: uint32(r.HopLimit), Flags: uint32(r.Flags), Synchronized: r.Synchronized(),
		RttNs: r.RTT(), ForwardNs: r.Forward(), BackwardNs: r.Backward()}
}

func delayProto(d *DelayStats) *api.StampDelay {
	return &api.StampDelay{N: d.N, MinNs: d.Min, MaxNs: d.Max, MeanNs: d.Mean, P50Ns: d.P50, P90Ns: d.P90, P99Ns: d.P99,
		Negative: d.Negative, Unsynchronized: d.Unsynchronized}
}

func jitterProto(j *JitterStats) *api.StampJitter {
	return &api.StampJitter{N: j.N, MeanAbsIpdvNs: j.MeanAbs, MaxAbsIpdvNs: j.MaxAbs, LastIpdvNs: j.Last, SmoothedNs: j.Smoothed}
}

// MetricsProto converts metrics for the control API.
func MetricsProto(m *Metrics) *api.StampMetrics {
	return &api.StampMetrics{Running: m.Running, Sent: m.Sent, Answered: m.Answered, Received: m.Received, Duplicates: m.Duplicates,
		Reordered: m.Reordered, Unsynchronized: m.Unsynchronized, RecordsLost: m.RecordsLost, LostRoundTrip: m.LostRoundTrip,
		LostForward: m.LostForward, LostBackward: m.LostBackward, Split: m.Split, InFlight: m.InFlight,
		Rtt: delayProto(&m.RTT), Forward: delayProto(&m.Forward), Backward: delayProto(&m.Backward),
		JitterForward: jitterProto(&m.JitterForward), JitterBackward: jitterProto(&m.JitterBack), JitterRtt: jitterProto(&m.JitterRTT)}
}

// MetricsFromProto converts back, for the CLI's report.
func MetricsFromProto(p *api.StampMetrics) Metrics {
	d := func(x *api.StampDelay) DelayStats {
		return DelayStats{N: x.GetN(), Min: x.GetMinNs(), Max: x.GetMaxNs(), Mean: x.GetMeanNs(), P50: x.GetP50Ns(), P90: x.GetP90Ns(),
			P99: x.GetP99Ns(), Negative: x.GetNegative(), Unsynchronized: x.GetUnsynchronized()}
	}
	j := func(x *api.StampJitter) JitterStats {
		return JitterStats{N: x.GetN(), MeanAbs: x.GetMeanAbsIpdvNs(), MaxAbs: x.GetMaxAbsIpdvNs(), Last: x.GetLastIpdvNs(), Smoothed: x.GetSmoothedNs()}
	}
	return Metrics{Running: p.GetRunning(), Sent: p.GetSent(), Answered: p.GetAnswered(), Received: p.GetReceived(),
		Duplicates: p.GetDuplicates(), Reordered: p.GetReordered(), Unsynchronized: p.GetUnsynchronized(), RecordsLost: p.GetRecordsLost(),
		LostRoundTrip: p.GetLostRoundTrip(), LostForward: p.GetLostForward(), LostBackward: p.GetLostBackward(), Split: p.GetSplit(),
		InFlight: p.GetInFlight(), RTT: d(p.GetRtt()), Forward: d(p.GetForward()), Backward: d(p.GetBackward()),
		JitterForward: j(p.GetJitterForward()), JitterBack: j(p.GetJitterBackward()), JitterRTT: j(p.GetJitterRtt())}
}
