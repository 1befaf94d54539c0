package ioam

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/plugins/ioam/api"
)

func init() {
	host.RegisterService("ioam", func(s *grpc.Server, h host.Host) {
		api.RegisterIoamServer(s, &service{h: h})
	})
}

// kinds are the IOAM stage kinds.
var kinds = []string{"ioam.encap", "ioam.transit", "ioam.decap"}

// service is the Ioam gRPC service. It reads what the stages made at setup
// (namespaces) and what they publish (export rings, through their exporter),
// never their lcore state.
type service struct {
	api.UnimplementedIoamServer
	h host.Host
}

// nodeOf lets the service reach a stage's node config, which does not change
// after setup.
func (n *node) nodeOf() *node { return n }

type nodeStage interface{ nodeOf() *node }

// ListIoamNamespaces lists each IOAM stage instance's namespaces.
func (sv *service) ListIoamNamespaces(ctx context.Context, _ *api.ListIoamNamespacesRequest) (*api.ListIoamNamespacesReply, error) {
	out := &api.ListIoamNamespacesReply{}
	for _, kind := range kinds {
		for _, ref := range sv.h.Instances(kind) {
			ns, ok := ref.Stage.(nodeStage)
			if !ok {
				continue
			}
			st := &api.IoamStageNamespaces{Pipeline: ref.Pipeline, Stage: ref.Name, Kind: ref.Kind, Lcore: uint32(ref.Lcore)}
			for _, s := range ns.nodeOf().ns.ns {
				st.Namespaces = append(st.Namespaces, &api.IoamNamespace{Id: uint32(s.ID), NodeId: s.NodeID, NodeIdWide: s.NodeIDWide,
					Data: s.Data, DataWide: s.DataWide, Timestamp: s.Timestamp.String(), HasSchema: s.HasSchema, SchemaId: s.SchemaID})
			}
			out.Stages = append(out.Stages, st)
		}
	}
	return out, nil
}

// StreamIoamRecords streams the records of every exporting stage (or the one
// named) until the client goes away.
func (sv *service) StreamIoamRecords(req *api.StreamIoamRecordsRequest, stream grpc.ServerStreamingServer[api.IoamRecord]) error {
	buf := int(req.GetBuffer())
	if buf <= 0 {
		buf = 1024
	}
	if buf > 1<<20 {
		return status.Errorf(codes.InvalidArgument, "buffer %d is above %d", buf, 1<<20)
	}
	sub := newSubscriber(buf)
	seen := map[*exporter]bool{}
	for _, kind := range kinds {
		for _, ref := range sv.h.Instances(kind) {
			if req.GetStage() != "" && ref.Name != req.GetStage() {
				continue
			}
			rs, ok := ref.Stage.(recordStage)
			if !ok {
				continue
			}
			if ex := rs.exporterOf(); ex != nil && !seen[ex] {
				seen[ex] = true
				ex.subscribe(sub)
			}
		}
	}
	if len(seen) == 0 {
		return status.Error(codes.FailedPrecondition, "no IOAM stage exports records: set export = true on an ioam.decap (or ioam.transit for DEX)")
	}
	defer func() {
		for ex := range seen {
			ex.unsubscribe(sub)
		}
		stream.SetTrailer(metadata.Pairs("ioam-dropped", strconv.FormatUint(sub.dropped.Load(), 10)))
	}()
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case it := <-sub.ch:
			if req.Namespace != nil && (it.rec.Have&HaveTrace == 0 || uint32(it.rec.TraceNS) != req.GetNamespace()) {
				continue
			}
			if err := stream.Send(RecordProto(it.stage, &it.rec)); err != nil {
				return err
			}
		}
	}
}

// RecordProto converts a record for the control API.
func RecordProto(stage string, r *Record) *api.IoamRecord {
	j := r.JSON(stage)
	//lint:ignore SA1019 the old name stays filled for old clients (docs/compatibility.md)
	out := &api.IoamRecord{Time: timestamppb.New(j.Time), Stage: stage, Role: j.Role, Instance: uint32(r.Instance), Lcore: uint32(r.Instance), Length: uint32(r.Len),
		Src: append([]byte(nil), r.Src[:]...), Dst: append([]byte(nil), r.Dst[:]...), E2EDelayNs: -1}
	if j.E2EDly != nil {
		out.E2EDelayNs = *j.E2EDly
	}
	if r.Have&HaveInner != 0 {
		out.InnerSrc, out.InnerDst = append([]byte(nil), r.InnerSrc[:]...), append([]byte(nil), r.InnerDst[:]...)
	}
	if r.Have&HaveTrace != 0 {
		t := &api.IoamTrace{Namespace: uint32(r.TraceNS), Option: j.Trace.Option, Flags: uint32(r.TraceFlags), TraceType: r.TraceType,
			NodeLen: uint32(r.NodeLen), RemainingLen: uint32(r.RemLen)}
		for _, h := range j.Trace.Hops {
			t.Hops = append(t.Hops, hopProto(&h))
		}
		out.Trace = t
	}
	if r.Have&HavePOT != 0 {
		out.Pot = &api.IoamPot{Namespace: uint32(r.POTNS), Random: r.POTRandom, Cumulative: r.POTCumulative, Result: j.POT.Result}
	}
	if r.Have&HaveE2E != 0 {
		out.E2E = &api.IoamE2E{Namespace: uint32(r.E2ENS), Type: uint32(r.E2EType), Seq64: r.E2E.Seq64, Seq32: r.E2E.Seq32,
			TsSec: r.E2E.Seconds, TsFrac: r.E2E.Fraction}
	}
	if r.Have&HaveDEX != 0 {
		out.Dex = &api.IoamDex{Namespace: uint32(r.DEXNS), TraceType: r.DEXType, ExtensionFlags: uint32(r.DEXExt), FlowId: r.DEXFlow, Sequence: r.DEXSeq}
	}
	return out
}

// hopProto is a record's hop for the control API: the JSON line's fields,
// zero where the line has none.
func hopProto(h *HopJSON) *api.IoamHop {
	hp := &api.IoamHop{HopLimit: uint32(val(h.HopLimit)), HopLimitWide: uint32(val(h.HopLimitWide)), NodeId: uint64(val(h.NodeID)),
		NodeIdWide: val(h.NodeIDWide), IngressIf: uint32(val(h.IngressIf)), EgressIf: uint32(val(h.EgressIf)),
		IngressIfWide: val(h.IngressIfWide), EgressIfWide: val(h.EgressIfWide), TsSec: val(h.Seconds), TsFrac: val(h.Fraction),
		TransitDelayNs: val(h.TransitDelay), TransitDelayOverflow: h.TransitDelayOverflow, NamespaceData: uint64(val(h.NamespaceData)),
		NamespaceDataWide: val(h.NamespaceDataWide), QueueDepth: val(h.QueueDepth), ChecksumComplement: val(h.ChecksumComplement),
		BufferOccupancy: val(h.Buffer), SchemaId: val(h.SchemaID), HopDelayNs: -1, Unknown: h.Unknown}
	if h.HopLimit == nil {
		hp.HopLimit = uint32(val(h.HopLimitWide))
	}
	if h.DelayNs != nil {
		hp.HopDelayNs = *h.DelayNs
	}
	for name, v := range h.Undefined {
		if bit, err := strconv.Atoi(strings.TrimPrefix(name, "bit")); err == nil {
			if hp.Undefined == nil {
				hp.Undefined = map[uint32]uint32{}
			}
			hp.Undefined[uint32(bit)] = v
		}
	}
	if h.Opaque != "" {
		hp.Opaque, _ = hex.DecodeString(h.Opaque)
	}
	return hp
}

// val is *p, or zero.
func val[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}
