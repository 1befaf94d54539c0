package stamp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/plugins/stamp/api/srv6pm"
)

// The seed controller's southbound services (srv6pm): the same sessions as
// linerate's own API, with the seed's conventions. Every reply is a gRPC
// success whose status field says what happened, as the seed's
// implementation does; sessions are created stopped and need Init first.

type seedSender struct {
	srv6pm.UnimplementedSTAMPSessionSenderServiceServer
	sv *service
}

type seedReflector struct {
	srv6pm.UnimplementedSTAMPSessionReflectorServiceServer
	sv *service
}

// seedStatus maps an error to the seed's status codes.
func seedStatus(err error) (srv6pm.StatusCode, string) {
	switch {
	case err == nil:
		return srv6pm.StatusCode_STATUS_CODE_SUCCESS, "success"
	case errors.Is(err, ErrNotFound):
		return srv6pm.StatusCode_STATUS_CODE_SESSION_NOT_FOUND, err.Error()
	case errors.Is(err, ErrExists):
		return srv6pm.StatusCode_STATUS_CODE_SESSION_EXISTS, err.Error()
	case errors.Is(err, ErrRunning):
		return srv6pm.StatusCode_STATUS_CODE_SESSION_RUNNING, err.Error()
	case errors.Is(err, ErrNotRunning):
		return srv6pm.StatusCode_STATUS_CODE_SESSION_NOT_RUNNING, err.Error()
	case errors.Is(err, ErrNotInitialized):
		return srv6pm.StatusCode_STATUS_CODE_NOT_INITIALIZED, err.Error()
	case errors.Is(err, ErrInitialized):
		return srv6pm.StatusCode_STATUS_CODE_ALREADY_INITIALIZED, err.Error()
	case errors.Is(err, ErrNoStage):
		return srv6pm.StatusCode_STATUS_CODE_INTERNAL_ERROR, err.Error()
	}
	return srv6pm.StatusCode_STATUS_CODE_INVALID_ARGUMENT, err.Error()
}

// seedInit is either role's Init: the role's UDP port (named field in the
// request), interfaces and source address for later sessions.
func (sv *service) seedInit(field string, port uint32, ifaces []string, source string,
	init func(*Registry, initParams, bool) error) (srv6pm.StatusCode, string) {
	r, err := sv.registry()
	if err == nil {
		if port > 65535 {
			err = fmt.Errorf("%s is above 65535", field)
		} else {
			err = init(r, initParams{port: uint16(port), interfaces: ifaces, source: source}, true)
		}
	}
	return seedStatus(err)
}

// seedReset is either role's Reset: it destroys the role's sessions made
// through an API and clears its Init.
func (sv *service) seedReset(reset func(*Registry, host.Host) int) (srv6pm.StatusCode, string) {
	r, err := sv.registry()
	if err != nil {
		return srv6pm.StatusCode_STATUS_CODE_RESET_FAILED, err.Error()
	}
	reset(r, sv.h)
	return srv6pm.StatusCode_STATUS_CODE_SUCCESS, "success"
}

// seedSSID checks an SSID from the seed, which sends it as 32 bits.
func seedSSID(ssid uint32) (uint16, error) {
	if ssid == 0 || ssid > 65535 {
		return 0, errors.New("ssid: 1..65535")
	}
	return uint16(ssid), nil
}

// seedCreate is what either role's CreateStampSession checks first: the
// registry, the role's Init, and the SSID.
func (sv *service) seedCreate(ssid uint32, initialized func(*Registry) bool) (*Registry, uint16, error) {
	r, err := sv.registry()
	if err != nil {
		return nil, 0, err
	}
	if !initialized(r) {
		return nil, 0, ErrNotInitialized
	}
	id, err := seedSSID(ssid)
	return r, id, err
}

// seedOp runs f, a session operation of either role, on the session ssid.
func seedOp[S any](sv *service, ssid uint32, f func(*Registry, uint16) (*S, error)) (srv6pm.StatusCode, string) {
	r, err := sv.registry()
	if err == nil {
		var id uint16
		if id, err = seedSSID(ssid); err == nil {
			_, err = f(r, id)
		}
	}
	return seedStatus(err)
}

// seedAuth reads the seed's authentication mode: HMAC-SHA-256 takes its key
// from the key chain named.
func seedAuth(mode srv6pm.AuthenticationMode, keyChain string) (auth bool, key string, err error) {
	switch mode {
	case srv6pm.AuthenticationMode_AUTHENTICATION_MODE_UNSPECIFIED, srv6pm.AuthenticationMode_AUTHENTICATION_MODE_UNAUTHENTICATED:
		return false, "", nil
	case srv6pm.AuthenticationMode_AUTHENTICATION_MODE_HMAC_SHA_256:
		return true, keyChain, nil
	}
	return false, "", errors.New("unknown auth_mode")
}

// seedAuthMode is the seed's name for a session's mode.
func seedAuthMode(auth bool) srv6pm.AuthenticationMode {
	if auth {
		return srv6pm.AuthenticationMode_AUTHENTICATION_MODE_HMAC_SHA_256
	}
	return srv6pm.AuthenticationMode_AUTHENTICATION_MODE_UNAUTHENTICATED
}

func (s *seedSender) Init(ctx context.Context, req *srv6pm.InitStampSenderRequest) (*srv6pm.InitStampSenderReply, error) {
	code, d := s.sv.seedInit("sender_udp_port", req.SenderUdpPort, req.Interfaces, req.StampSourceIpv6Address, (*Registry).initTx)
	return &srv6pm.InitStampSenderReply{Status: code, Description: d}, nil
}

func (s *seedSender) Reset(ctx context.Context, req *srv6pm.ResetStampSenderRequest) (*srv6pm.ResetStampSenderReply, error) {
	code, d := s.sv.seedReset((*Registry).resetTx)
	return &srv6pm.ResetStampSenderReply{Status: code, Description: d}, nil
}

func (s *seedSender) CreateStampSession(ctx context.Context, req *srv6pm.CreateStampSenderSessionRequest) (*srv6pm.CreateStampSenderSessionReply, error) {
	params, err := s.create(req)
	code, d := seedStatus(err)
	return &srv6pm.CreateStampSenderSessionReply{Status: code, Description: d, StampParams: params}, nil
}

func (s *seedSender) create(req *srv6pm.CreateStampSenderSessionRequest) (*srv6pm.StampSenderParameters, error) {
	r, id, err := s.sv.seedCreate(req.Ssid, (*Registry).txInitialized)
	if err != nil {
		return nil, err
	}
	p := req.StampParams
	if p == nil {
		p = &srv6pm.StampSenderParameters{}
	}
	c := SenderSession{SSID: id, Interval: time.Duration(req.Interval) * time.Second}
	if c.Segments, err = parseAddrs(req.Sidlist.GetSegments()); err != nil {
		return nil, err
	}
	if c.Reflector, err = optAddr(p.ReflectorIp); err != nil {
		return nil, err
	}
	if !c.Reflector.IsValid() {
		if len(c.Segments) == 0 {
			return nil, errors.New("no reflector: give reflector_ip or a sidlist ending at the reflector")
		}
		c.Reflector = c.Segments[len(c.Segments)-1]
	}
	if c.Src, err = optAddr(req.StampSourceIpv6Address); err != nil {
		return nil, err
	}
	if p.ReflectorUdpPort > 65535 {
		return nil, errors.New("reflector_udp_port is above 65535")
	}
	c.ReflectorPort = uint16(p.ReflectorUdpPort)
	var key string
	if c.Auth, key, err = seedAuth(p.AuthMode, p.KeyChain); err != nil {
		return nil, err
	}
	switch p.TimestampFormat {
	case srv6pm.TimestampFormat_TIMESTAMP_FORMAT_UNSPECIFIED, srv6pm.TimestampFormat_TIMESTAMP_FORMAT_NTP:
	case srv6pm.TimestampFormat_TIMESTAMP_FORMAT_PTPv2:
		c.PTP = true
	default:
		return nil, errors.New("unknown timestamp_format")
	}
	if p.DelayMeasurementMode == srv6pm.DelayMeasurementMode_DELAY_MEASUREMENT_MODE_LOOPBACK {
		return nil, errors.New("loopback delay measurement is not supported: use one-way or two-way")
	}
	ts, err := r.createSender(c, key, false)
	if err != nil {
		return nil, err
	}
	out := &srv6pm.StampSenderParameters{ReflectorIp: ts.cfg.Reflector.String(), ReflectorUdpPort: uint32(ts.cfg.ReflectorPort),
		AuthMode: seedAuthMode(ts.cfg.Auth), KeyChain: p.KeyChain,
		TimestampFormat: srv6pm.TimestampFormat_TIMESTAMP_FORMAT_NTP, PacketLossType: p.PacketLossType,
		DelayMeasurementMode: p.DelayMeasurementMode}
	if ts.cfg.PTP {
		out.TimestampFormat = srv6pm.TimestampFormat_TIMESTAMP_FORMAT_PTPv2
	}
	if out.PacketLossType == srv6pm.PacketLossType_PACKET_LOSS_TYPE_UNSPECIFIED {
		out.PacketLossType = srv6pm.PacketLossType_PACKET_LOSS_TYPE_ROUND_TRIP
	}
	if out.DelayMeasurementMode == srv6pm.DelayMeasurementMode_DELAY_MEASUREMENT_MODE_UNSPECIFIED {
		out.DelayMeasurementMode = srv6pm.DelayMeasurementMode_DELAY_MEASUREMENT_MODE_TWO_WAY
	}
	return out, nil
}

func (s *seedSender) StartStampSession(ctx context.Context, req *srv6pm.StartStampSenderSessionRequest) (*srv6pm.StartStampSenderSessionReply, error) {
	code, d := seedOp(s.sv, req.Ssid, (*Registry).startTx)
	return &srv6pm.StartStampSenderSessionReply{Status: code, Description: d}, nil
}

func (s *seedSender) StopStampSession(ctx context.Context, req *srv6pm.StopStampSenderSessionRequest) (*srv6pm.StopStampSenderSessionReply, error) {
	code, d := seedOp(s.sv, req.Ssid, (*Registry).stopTx)
	return &srv6pm.StopStampSenderSessionReply{Status: code, Description: d}, nil
}

func (s *seedSender) DestroyStampSession(ctx context.Context, req *srv6pm.DestroyStampSenderSessionRequest) (*srv6pm.DestroyStampSenderSessionReply, error) {
	code, d := seedOp(s.sv, req.Ssid, func(r *Registry, id uint16) (*txSession, error) { return r.destroyTx(id, s.sv.h) })
	return &srv6pm.DestroyStampSenderSessionReply{Status: code, Description: d}, nil
}

// GetStampSessionResults drains the records, as the seed's polling mode
// does: fetched records are gone. Timestamps are Unix seconds.
func (s *seedSender) GetStampSessionResults(ctx context.Context, req *srv6pm.GetStampSessionResultsRequest) (*srv6pm.StampResults, error) {
	var ts *txSession
	code, d := seedOp(s.sv, req.Ssid, func(r *Registry, id uint16) (*txSession, error) {
		var err error
		ts, err = r.tx1(id)
		return ts, err
	})
	out := &srv6pm.StampResults{Status: code, Description: d}
	if ts == nil {
		return out, nil
	}
	for _, r := range ts.drain(maxRecordsPerReply) {
		out.Results = append(out.Results, &srv6pm.StampSessionResult{Ssid: uint32(r.SSID),
			TestPktTxTimestamp: secs(r.T1), TestPktRxTimestamp: secs(r.T2), ReplyPktTxTimestamp: secs(r.T3), ReplyPktRxTimestamp: secs(r.T4)})
	}
	return out, nil
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

func (s *seedSender) GetResultsCounter(ctx context.Context, req *srv6pm.StampResultsCountersRequest) (*srv6pm.StampResultsCountersReply, error) {
	var ts *txSession
	code, _ := seedOp(s.sv, req.Ssid, func(r *Registry, id uint16) (*txSession, error) {
		var err error
		ts, err = r.tx1(id)
		return ts, err
	})
	out := &srv6pm.StampResultsCountersReply{Status: code}
	if ts != nil {
		out.NumResults = uint32(ts.waiting())
	}
	return out, nil
}

func (s *seedReflector) Init(ctx context.Context, req *srv6pm.InitStampReflectorRequest) (*srv6pm.InitStampReflectorReply, error) {
	code, d := s.sv.seedInit("reflector_udp_port", req.ReflectorUdpPort, req.Interfaces, req.StampSourceIpv6Address, (*Registry).initRf)
	return &srv6pm.InitStampReflectorReply{Status: code, Description: d}, nil
}

func (s *seedReflector) Reset(ctx context.Context, req *srv6pm.ResetStampReflectorRequest) (*srv6pm.ResetStampReflectorReply, error) {
	code, d := s.sv.seedReset((*Registry).resetRf)
	return &srv6pm.ResetStampReflectorReply{Status: code, Description: d}, nil
}

func (s *seedReflector) CreateStampSession(ctx context.Context, req *srv6pm.CreateStampReflectorSessionRequest) (*srv6pm.CreateStampReflectorSessionReply, error) {
	params, err := s.create(req)
	code, d := seedStatus(err)
	return &srv6pm.CreateStampReflectorSessionReply{Status: code, Description: d, StampParams: params}, nil
}

func (s *seedReflector) create(req *srv6pm.CreateStampReflectorSessionRequest) (*srv6pm.StampReflectorParameters, error) {
	r, id, err := s.sv.seedCreate(req.Ssid, (*Registry).rfInitialized)
	if err != nil {
		return nil, err
	}
	p := req.StampParams
	if p == nil {
		p = &srv6pm.StampReflectorParameters{}
	}
	c := ReflectorSession{SSID: id}
	if c.ReturnPath, err = parseAddrs(req.ReturnSidlist.GetSegments()); err != nil {
		return nil, err
	}
	// The seed's return path ends at the sender: pin it, so that the reply
	// may carry the SRH even when the forward packet had a shorter one.
	if n := len(c.ReturnPath); n > 0 {
		c.Sender = c.ReturnPath[n-1]
	}
	if c.Source, err = optAddr(req.StampSourceIpv6Address); err != nil {
		return nil, err
	}
	var key string
	if c.Auth, key, err = seedAuth(p.AuthMode, p.KeyChain); err != nil {
		return nil, err
	}
	switch p.TimestampFormat {
	case srv6pm.TimestampFormat_TIMESTAMP_FORMAT_UNSPECIFIED:
	case srv6pm.TimestampFormat_TIMESTAMP_FORMAT_NTP:
		f := false
		c.PTP = &f
	case srv6pm.TimestampFormat_TIMESTAMP_FORMAT_PTPv2:
		t := true
		c.PTP = &t
	default:
		return nil, errors.New("unknown timestamp_format")
	}
	switch p.SessionReflectorMode {
	case srv6pm.SessionReflectorMode_SESSION_REFLECTOR_MODE_UNSPECIFIED, srv6pm.SessionReflectorMode_SESSION_REFLECTOR_MODE_STATELESS:
	case srv6pm.SessionReflectorMode_SESSION_REFLECTOR_MODE_STATEFUL:
		c.Stateful = true
	default:
		return nil, errors.New("unknown session_reflector_mode")
	}
	r.mu.Lock()
	_, info, err := r.reflectorStage("")
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if p.ReflectorUdpPort != 0 && p.ReflectorUdpPort != uint32(info.defaults.port) {
		return nil, errors.New("reflector_udp_port differs from the reflector stage's port")
	}
	rs, err := r.createReflector(c, key, false)
	if err != nil {
		return nil, err
	}
	out := &srv6pm.StampReflectorParameters{ReflectorUdpPort: uint32(info.defaults.port),
		AuthMode: seedAuthMode(rs.cfg.Auth), KeyChain: p.KeyChain,
		TimestampFormat:      p.TimestampFormat,
		SessionReflectorMode: srv6pm.SessionReflectorMode_SESSION_REFLECTOR_MODE_STATELESS}
	if rs.cfg.Stateful {
		out.SessionReflectorMode = srv6pm.SessionReflectorMode_SESSION_REFLECTOR_MODE_STATEFUL
	}
	if out.TimestampFormat == srv6pm.TimestampFormat_TIMESTAMP_FORMAT_UNSPECIFIED {
		out.TimestampFormat = srv6pm.TimestampFormat_TIMESTAMP_FORMAT_NTP
	}
	return out, nil
}

func (s *seedReflector) StartStampSession(ctx context.Context, req *srv6pm.StartStampReflectorSessionRequest) (*srv6pm.StartStampReflectorSessionReply, error) {
	code, d := seedOp(s.sv, req.Ssid, (*Registry).startRf)
	return &srv6pm.StartStampReflectorSessionReply{Status: code, Description: d}, nil
}

func (s *seedReflector) StopStampSession(ctx context.Context, req *srv6pm.StopStampReflectorSessionRequest) (*srv6pm.StopStampReflectorSessionReply, error) {
	code, d := seedOp(s.sv, req.Ssid, (*Registry).stopRf)
	return &srv6pm.StopStampReflectorSessionReply{Status: code, Description: d}, nil
}

func (s *seedReflector) DestroyStampSession(ctx context.Context, req *srv6pm.DestroyStampReflectorSessionRequest) (*srv6pm.DestroyStampReflectorSessionReply, error) {
	code, d := seedOp(s.sv, req.Ssid, func(r *Registry, id uint16) (*rfSession, error) { return r.destroyRf(id, s.sv.h) })
	return &srv6pm.DestroyStampReflectorSessionReply{Status: code, Description: d}, nil
}
