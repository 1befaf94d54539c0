package ioam

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/ipfix"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// exporter drains the export rings of one stage's instances (one ring per
// lcore) on a control goroutine, and writes the records as JSON lines and to
// the subscribers of the control API's stream.
type exporter struct {
	stage string
	file  string
	log   *slog.Logger
	rings []*ring.Export[Record]

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	refs    int
	started bool
	quit    chan struct{}
	done    chan struct{}

	written atomic.Uint64
	errors  atomic.Uint64

	// ipfix, when the file has an [ipfix] table, gets every record's hops;
	// ipfixID numbers the records, ipfixBuf holds one hop record.
	ipfix    *ipfix.Exporter
	ipfixID  uint64
	ipfixBuf [hopRecordLen]byte
}

// subscriber is one StreamIoamRecords call; it may listen to several
// exporters through one channel.
type subscriber struct {
	ch      chan streamItem
	dropped atomic.Uint64
}

// streamItem is a record and the stage that exported it.
type streamItem struct {
	stage string
	rec   Record
}

// exportInterval is how often the rings are drained.
const exportInterval = 2 * time.Millisecond

// setupExport returns this instance's side of the stage's export, when c asks
// for one: a ring of its own, and the exporter its stage's lcore instances
// share. It returns nil otherwise.
func setupExport(s *plugins.Setup, c *exportConfig) (*exportState, error) {
	if !c.Export {
		return nil, nil
	}
	ix, err := ipfix.Shared(s.Section(ipfix.SectionName), s.Global, s.Log)
	if err != nil {
		return nil, err
	}
	if ix != nil {
		if err := ix.Register(HopTemplate); err != nil {
			return nil, err
		}
	}
	ex := s.Shared("ioam.export/"+s.Name, func() any {
		return &exporter{stage: s.Name, file: c.ExportFile, log: s.Log, subs: map[*subscriber]struct{}{}, ipfix: ix}
	}).(*exporter)
	r := ring.NewExport[Record](c.ExportRing, c.ExportSample)
	ex.mu.Lock()
	ex.rings = append(ex.rings, r)
	ex.mu.Unlock()
	return &exportState{ex: ex, ring: r}, nil
}

// start begins the drain goroutine on the first instance's start.
func (ex *exporter) start(out *plugins.Output) error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.refs++
	if ex.started {
		return nil
	}
	var w io.Writer
	var f *os.File
	switch ex.file {
	case "":
	case "-":
		w = out.Writer()
	default:
		var err error
		f, err = os.OpenFile(ex.file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("%s: export_file: %w", ex.stage, err)
		}
		w = f
	}
	ex.started = true
	if ex.ipfix != nil {
		ex.ipfix.Start()
	}
	ex.quit, ex.done = make(chan struct{}), make(chan struct{})
	go ex.run(w, f)
	return nil
}

// stop ends the drain goroutine when the last instance stops, after a final
// drain.
func (ex *exporter) stop() {
	ex.mu.Lock()
	ex.refs--
	last := ex.refs == 0 && ex.started
	if last {
		ex.started = false
	}
	quit, done := ex.quit, ex.done
	ex.mu.Unlock()
	if last {
		close(quit)
		<-done
		if ex.ipfix != nil {
			ex.ipfix.Stop()
		}
	}
}

func (ex *exporter) run(w io.Writer, f *os.File) {
	defer close(ex.done)
	var bw *bufio.Writer
	if w != nil {
		bw = bufio.NewWriterSize(w, 64<<10)
	}
	buf := make([]Record, 256)
	t := time.NewTicker(exportInterval)
	defer t.Stop()
	drain := func() {
		for _, r := range ex.rings {
			for {
				n := r.Drain(buf)
				if n == 0 {
					break
				}
				ex.deliver(buf[:n], bw)
				if n < len(buf) {
					break
				}
			}
		}
		if bw != nil {
			if err := bw.Flush(); err != nil && ex.errors.Add(1) == 1 {
				ex.log.Warn("ioam export", "stage", ex.stage, "err", err)
			}
		}
	}
	for {
		select {
		case <-t.C:
			drain()
		case <-ex.quit:
			drain()
			if f != nil {
				_ = f.Close()
			}
			return
		}
	}
}

func (ex *exporter) deliver(recs []Record, bw *bufio.Writer) {
	ex.mu.Lock()
	subs := len(ex.subs)
	ex.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		if ex.ipfix != nil && r.Have&HaveTrace != 0 {
			ex.ipfixID++
			ipfixHops(ex.ipfix, r, ex.ipfixID, ex.ipfixBuf[:])
		}
		if bw != nil {
			line, err := r.MarshalLine(ex.stage)
			if err == nil {
				_, err = bw.Write(line)
			}
			if err != nil {
				ex.errors.Add(1)
				continue
			}
			ex.written.Add(1)
		}
		if subs > 0 {
			ex.mu.Lock()
			for s := range ex.subs {
				select {
				case s.ch <- streamItem{ex.stage, *r}:
				default:
					s.dropped.Add(1)
				}
			}
			ex.mu.Unlock()
		}
	}
}

// newSubscriber makes a stream subscriber with a buffer of n records.
func newSubscriber(n int) *subscriber { return &subscriber{ch: make(chan streamItem, n)} }

// subscribe adds a stream subscriber.
func (ex *exporter) subscribe(s *subscriber) {
	ex.mu.Lock()
	ex.subs[s] = struct{}{}
	ex.mu.Unlock()
}

func (ex *exporter) unsubscribe(s *subscriber) {
	ex.mu.Lock()
	delete(ex.subs, s)
	ex.mu.Unlock()
}

// exportState is an instance's side of the export: its ring, and the
// exporter that drains it.
type exportState struct {
	ex   *exporter
	ring *ring.Export[Record]
}

// exported is what a stage that exports records holds: its side of the
// export (nil without one) and the export_dropped counter. It gives the stage
// Start, Stop and exporterOf.
type exported struct {
	exp         *exportState
	cDropped    *stats.Counter
	lastDropped uint64
}

// Start starts the export.
func (x *exported) Start(ctx *plugins.Context) error {
	if x.exp != nil {
		return x.exp.ex.start(ctx.Out)
	}
	return nil
}

// Stop stops the export.
func (x *exported) Stop(ctx *plugins.Context) {
	if x.exp != nil {
		x.exp.ex.stop()
	}
}

func (x *exported) exporterOf() *exporter {
	if x.exp == nil {
		return nil
	}
	return x.exp.ex
}

// countDropped moves the ring's export_dropped into the stage counter: once
// a burst.
func (x *exported) countDropped() {
	if x.exp == nil {
		return
	}
	if n := x.exp.ring.Dropped(); n != x.lastDropped {
		x.cDropped.Add(n - x.lastDropped)
		x.lastDropped = n
	}
}

// recordStage is implemented by the stages that export records; the control
// service finds their exporters through it.
type recordStage interface {
	exporterOf() *exporter
}
