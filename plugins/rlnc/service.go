package rlnc

import (
	"bytes"
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/plugins/rlnc/api"
)

func init() {
	host.RegisterService("rlnc", func(s *grpc.Server, h host.Host) {
		api.RegisterRlncServer(s, &service{h: h})
	})
}

// kinds are the RLNC stage kinds.
var kinds = []string{"rlnc.encoder", "rlnc.recoder", "rlnc.decoder"}

// service is the Rlnc gRPC service. Session state belongs to each stage's
// lcore, so every read and every flush runs there, through Host.Do.
type service struct {
	api.UnimplementedRlncServer
	h host.Host
}

// storeStage is a stage with a store; every RLNC stage is one.
type storeStage interface{ storeOf() *store }

func (e *encoder) storeOf() *store { return e.st }
func (r *recoder) storeOf() *store { return r.st }
func (d *decoder) storeOf() *store { return d.st }

// each runs fn on the lcore of every RLNC stage instance the filter names.
func (sv *service) each(f *api.RlncSessionFilter, fn func(ref host.StageRef, st *store)) error {
	if f != nil {
		if n := len(f.GetSrc()); n != 0 && n != 16 {
			return status.Errorf(codes.InvalidArgument, "src is %d bytes, want 16 (IPv6) or none", n)
		}
		if n := len(f.GetDst()); n != 0 && n != 16 {
			return status.Errorf(codes.InvalidArgument, "dst is %d bytes, want 16 (IPv6) or none", n)
		}
		if f.SessionId != nil && f.GetSessionId() > 255 {
			return status.Errorf(codes.InvalidArgument, "session_id %d is above 255", f.GetSessionId())
		}
	}
	for _, kind := range kinds {
		for _, ref := range sv.h.Instances(kind) {
			if f.GetStage() != "" && ref.Name != f.GetStage() {
				continue
			}
			ss, ok := ref.Stage.(storeStage)
			if !ok {
				continue
			}
			st := ss.storeOf()
			if err := sv.h.Do(ref.Lcore, func() { fn(ref, st) }); err != nil {
				return status.Errorf(codes.Unavailable, "stage %s on lcore %d: %v", ref.Name, ref.Lcore, err)
			}
		}
	}
	return nil
}

// matches reports whether session s passes the filter.
func matches(f *api.RlncSessionFilter, s *session) bool {
	if f == nil {
		return true
	}
	if src := f.GetSrc(); len(src) == 16 && !bytes.Equal(src, s.key.src[:]) {
		return false
	}
	if dst := f.GetDst(); len(dst) == 16 && !bytes.Equal(dst, s.key.dst[:]) {
		return false
	}
	return f.SessionId == nil || f.GetSessionId() == uint32(s.key.id)
}

func (sv *service) ListRlncSessions(ctx context.Context, req *api.ListRlncSessionsRequest) (*api.ListRlncSessionsReply, error) {
	out := &api.ListRlncSessionsReply{}
	now := sv.h.Clock().Now()
	err := sv.each(req.GetFilter(), func(ref host.StageRef, st *store) {
		ss := &api.RlncStageSessions{Pipeline: ref.Pipeline, Stage: ref.Name, Kind: ref.Kind, Lcore: uint32(ref.Lcore),
			Store: &api.RlncStore{MaxSessions: uint32(st.cfg.MaxSessions), MaxGenerations: uint32(st.cfg.MaxGenerations),
				MaxSessionGenerations: uint32(st.cfg.MaxSessionGenerations), Window: uint32(st.cfg.Window),
				SessionTimeoutNs: st.timeout, Sessions: uint32(st.sessLRU.n), Generations: uint32(st.liveGens()),
				BlocksUsed: uint32(st.liveSlots()), BlocksTotal: uint32(len(st.arena) / st.stride)}}
		for si := st.sessLRU.head; si >= 0; si = st.sl.next[si] {
			s := &st.sess[si]
			if !matches(req.GetFilter(), s) {
				continue
			}
			ss.Sessions = append(ss.Sessions, &api.RlncSession{Src: append([]byte(nil), s.key.src[:]...), Dst: append([]byte(nil), s.key.dst[:]...),
				SessionId: uint32(s.key.id), NextHeader: uint32(s.nextHdr), SessionLength: uint32(s.sessLen),
				NewestGeneration: uint32(s.newest), Generations: uint32(s.gens.n), Packets: s.packets, Finished: s.finished,
				IdleNs: now - s.last, AgeNs: now - s.created})
		}
		out.Stages = append(out.Stages, ss)
	})
	return out, err
}

func (sv *service) ListRlncGenerations(ctx context.Context, req *api.ListRlncGenerationsRequest) (*api.ListRlncGenerationsReply, error) {
	out := &api.ListRlncGenerationsReply{}
	now := sv.h.Clock().Now()
	err := sv.each(req.GetFilter(), func(ref host.StageRef, st *store) {
		sg := &api.RlncStageGenerations{Pipeline: ref.Pipeline, Stage: ref.Name, Kind: ref.Kind, Lcore: uint32(ref.Lcore)}
		links := 0
		if r, ok := ref.Stage.(*recoder); ok {
			links = len(r.links)
		}
		for si := st.sessLRU.head; si >= 0; si = st.sl.next[si] {
			s := &st.sess[si]
			if !matches(req.GetFilter(), s) {
				continue
			}
			for gi := s.gens.head; gi >= 0; gi = st.gs.next[gi] {
				ge := &st.gens[gi]
				g := &api.RlncGeneration{Src: append([]byte(nil), s.key.src[:]...), Dst: append([]byte(nil), s.key.dst[:]...),
					SessionId: uint32(s.key.id), GenerationId: uint32(ge.id), K: uint32(ge.k), BlocksUsed: uint32(ge.kk),
					BlockLen: uint32(ge.n), Rank: uint32(len(ge.rows)), AgeNs: now - ge.first, IdleNs: now - ge.last}
				for i := 0; i < ge.kk; i++ {
					if bitHas(&ge.delivered, i) {
						g.Delivered++
					}
				}
				for li := 0; li < links; li++ {
					g.Sent = append(g.Sent, uint32(ge.sent[li]))
					g.Owed = append(g.Owed, uint32(ge.credits[li]))
				}
				sg.Generations = append(sg.Generations, g)
			}
		}
		out.Stages = append(out.Stages, sg)
	})
	return out, err
}

func (sv *service) FlushRlncSessions(ctx context.Context, req *api.FlushRlncSessionsRequest) (*api.FlushRlncSessionsReply, error) {
	out := &api.FlushRlncSessionsReply{}
	err := sv.each(req.GetFilter(), func(ref host.StageRef, st *store) {
		// On the lcore, between loops: an encoder sends the open
		// generations of the sessions it drops, as at a timeout.
		for si := st.sessLRU.tail; si >= 0; {
			prev := st.sl.prev[si]
			if matches(req.GetFilter(), &st.sess[si]) {
				st.freeSession(si)
				out.Flushed++
			}
			si = prev
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
