package tester

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"

	"github.com/linerate/linerate/appliance/api"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/plugins/stamp/api/srv6pm"
)

// DUTClient reads a linerate DUT's counters over its control API.
type DUTClient struct {
	cc       *grpc.ClientConn
	client   api.ApplianceClient
	consumed []string
}

// DUTConn is a DUT's counters over gRPC.
type DUTConn interface {
	DUTCounters
	Close() error
}

// DialDUT connects to the DUT's API, linerate's or the seed's srv6pm. It
// fails when the address is wrong; an unreachable DUT fails the first read.
func DialDUT(d DUT) (DUTConn, error) {
	cc, err := control.Dial(d.Control)
	if err != nil {
		return nil, fmt.Errorf("DUT control API %s: %w", d.Control, err)
	}
	if d.API == "srv6pm" {
		return &Srv6pmClient{cc: cc, client: srv6pm.NewSTAMPSessionSenderServiceClient(cc), ssid: uint32(d.SSID)}, nil
	}
	return &DUTClient{cc: cc, client: api.NewApplianceClient(cc), consumed: d.Consumed}, nil
}

// Srv6pmClient reads what a DUT's STAMP collector consumed through the seed
// paper's southbound API: each Read drains the session's results and adds
// them up. The session's record FIFO must hold a trial's replies, or the
// excess is lost to the count (linerate's sessions: records).
type Srv6pmClient struct {
	cc     *grpc.ClientConn
	client srv6pm.STAMPSessionSenderServiceClient
	ssid   uint32
	total  uint64
}

// Close closes the connection.
func (c *Srv6pmClient) Close() error { return c.cc.Close() }

// Read drains the session's results and returns how many there have been.
// The API has no drop counters.
func (c *Srv6pmClient) Read(ctx context.Context) (uint64, map[string]uint64, error) {
	for {
		rep, err := c.client.GetStampSessionResults(ctx, &srv6pm.GetStampSessionResultsRequest{Ssid: c.ssid})
		if err != nil {
			return 0, nil, fmt.Errorf("srv6pm GetStampSessionResults: %w", err)
		}
		if rep.GetStatus() != srv6pm.StatusCode_STATUS_CODE_SUCCESS {
			return 0, nil, fmt.Errorf("srv6pm GetStampSessionResults, session %d: %v %s", c.ssid, rep.GetStatus(), rep.GetDescription())
		}
		if len(rep.GetResults()) == 0 {
			return c.total, nil, nil
		}
		c.total += uint64(len(rep.GetResults()))
	}
}

// Close closes the connection.
func (c *DUTClient) Close() error { return c.cc.Close() }

// Read returns what the consuming stages took so far, and the DUT's drops by
// reason. A stage's consumption is its "consumed" or "records" counter when
// it has one (a STAMP collector counts the replies it measured as records),
// else the packets it took in less those it dropped.
func (c *DUTClient) Read(ctx context.Context) (uint64, map[string]uint64, error) {
	rep, err := c.client.Stats(ctx, &api.StatsRequest{OmitBuckets: true})
	if err != nil {
		return 0, nil, fmt.Errorf("DUT stats: %w", err)
	}
	var consumed uint64
	found := map[string]bool{}
	for _, st := range rep.GetStages() {
		if !slices.Contains(c.consumed, st.GetName()) {
			continue
		}
		found[st.GetName()] = true
		n, has := uint64(0), false
		for _, ct := range st.GetCounters() {
			if ct.GetName() == "consumed" || ct.GetName() == "records" {
				n, has = n+ct.GetValue(), true
			}
		}
		if !has {
			n = st.GetPackets()
			for _, d := range st.GetDrops() {
				n -= min(n, d.GetCount())
			}
		}
		consumed += n
	}
	for _, name := range c.consumed {
		if !found[name] {
			return 0, nil, fmt.Errorf("the DUT has no stage %q (test.dut.consumed)", name)
		}
	}
	drops := map[string]uint64{}
	for _, d := range rep.GetDrops() {
		drops[d.GetReason()] += d.GetCount()
	}
	return consumed, drops, nil
}
