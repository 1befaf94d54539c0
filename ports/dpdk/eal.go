//go:build dpdk

package dpdk

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -DALLOW_EXPERIMENTAL_API -O3
#cgo LDFLAGS: -lrte_bus_vdev
#include <stdlib.h>
#include "lr.h"
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/linerate/linerate/appliance/cpuset"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/ports"
)

// EAL is the [dpdk] table of the config: how the EAL starts and how big the mbuf
// pools are. The zero value is usable: every key has a default (see doc.go).
type EAL struct {
	EALArgs    []string        `toml:"eal_args"`
	Lcores     string          `toml:"lcores"`
	Memory     config.ByteSize `toml:"memory"`
	Huge       *bool           `toml:"huge"`
	InMemory   bool            `toml:"in_memory"`
	FilePrefix string          `toml:"file_prefix"`
	LogLevel   string          `toml:"log_level"`
	Drivers    []string        `toml:"drivers"`
	PoolSize   int             `toml:"pool_size"`
	PoolCache  int             `toml:"pool_cache"`
	DataRoom   int             `toml:"data_room"`
}

// Pool defaults.
const (
	DefaultPoolSize  = 16383 // 2^n - 1: the mempool ring's best size
	DefaultPoolCache = 256
	DefaultDataRoom  = 2048
	// Headroom is a fresh packet's: DPDK's own (RTE_PKTMBUF_HEADROOM, 128 bytes,
	// fixed when DPDK is built) and LR_EXTRA more from the mbuf private area in
	// front of the buffer, 320 in all as linerate's own pools have.
	Headroom = C.RTE_PKTMBUF_HEADROOM + C.LR_EXTRA
	// rteHeadroom is the part inside the mbuf's buffer.
	rteHeadroom = C.RTE_PKTMBUF_HEADROOM
)

func (c *EAL) defaults() {
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.PoolCache == 0 {
		c.PoolCache = DefaultPoolCache
	}
	if c.DataRoom == 0 {
		c.DataRoom = DefaultDataRoom
	}
	if c.LogLevel == "" {
		c.LogLevel = "warning"
	}
}

func (c EAL) withDefaults() *EAL {
	c.defaults()
	return &c
}

func (c *EAL) check() error {
	switch {
	case c.PoolSize < 2*packet.MaxBurst || c.PoolSize > 1<<26:
		return fmt.Errorf("pool_size %d is outside %d..%d", c.PoolSize, 2*packet.MaxBurst, 1<<26)
	case c.PoolCache < 0 || c.PoolCache > C.RTE_MEMPOOL_CACHE_MAX_SIZE || c.PoolCache > c.PoolSize/2:
		return fmt.Errorf("pool_cache %d is outside 0..%d (and at most half of pool_size)", c.PoolCache, C.RTE_MEMPOOL_CACHE_MAX_SIZE)
	case c.DataRoom < 64 || c.DataRoom+rteHeadroom > 65535:
		return fmt.Errorf("data_room %d is outside 64..%d", c.DataRoom, 65535-rteHeadroom)
	case c.Memory < 0:
		return fmt.Errorf("memory %d is negative", c.Memory)
	}
	for _, a := range c.EALArgs {
		if a == "" {
			return errors.New("eal_args holds an empty argument")
		}
	}
	return nil
}

// huge reports whether the EAL will use hugepages.
func (c *EAL) huge() bool {
	return (c.Huge == nil || *c.Huge) && !slices.Contains(c.EALArgs, "--no-huge")
}

// Args builds rte_eal_init's arguments (without the program name). lcores are
// the engine's lcore CPUs: the EAL main lcore goes on another CPU when there is
// one, because the engine registers its own threads (lcore.go) and the main
// lcore's thread only sleeps.
func (c EAL) Args(lcores []int) []string {
	c.defaults()
	var a []string
	if c.Lcores != "" {
		a = append(a, "-l", c.Lcores)
	} else if !hasAny(c.EALArgs, "-l", "-c", "--lcores") {
		a = append(a, "-l", strconv.Itoa(mainCPU(lcores)))
	}
	if c.Memory > 0 {
		a = append(a, "-m", strconv.FormatInt(max(int64(c.Memory)>>20, 1), 10))
	}
	if !(c.Huge == nil || *c.Huge) {
		a = append(a, "--no-huge")
	}
	if c.InMemory {
		a = append(a, "--in-memory")
	}
	if c.FilePrefix != "" {
		a = append(a, "--file-prefix", c.FilePrefix)
	}
	a = append(a, "--log-level", c.LogLevel)
	for _, d := range c.Drivers {
		a = append(a, "-d", d)
	}
	return normalizeArgs(append(a, c.EALArgs...))
}

// normalizeArgs rewrites what DPDK 22.11 rejects but means something clear:
// --no-huge forces its legacy memory mode, which refuses --in-memory; without
// hugepage files to unlink, --in-memory is exactly --no-shconf.
func normalizeArgs(a []string) []string {
	if slices.Contains(a, "--no-huge") {
		for i, s := range a {
			if s == "--in-memory" {
				a[i] = "--no-shconf"
			}
		}
	}
	return a
}

func hasAny(a []string, opts ...string) bool {
	for _, s := range a {
		for _, o := range opts {
			if s == o || strings.HasPrefix(s, o+"=") {
				return true
			}
		}
	}
	return false
}

// mainCPU picks the EAL main lcore's CPU: the first CPU this process may use that
// runs no engine lcore, or the first CPU at all.
func mainCPU(lcores []int) int {
	cpus := cpuset.Allowed()
	for _, c := range cpus {
		if !slices.Contains(lcores, c) {
			return c
		}
	}
	if len(cpus) > 0 {
		return cpus[0]
	}
	return 0
}

// The EAL runs once per process. Its main thread is a goroutine locked to its OS
// thread for good: rte_eal_init pinned that thread to the main lcore's CPU and
// gave it the main lcore's identity, which must not leak to other goroutines.
var eal struct {
	mu      sync.Mutex
	started bool
	err     error
	args    []string
	cleaned bool
	work    chan func()
	cfg     EAL // pool sizes of the config that started the EAL
}

// Start starts the EAL with args (rte_eal_init's, without the program name) and
// pool defaults from cfg, once per process. Tests call it from TestMain; the
// driver calls it through the [dpdk] table. A later call returns the first one's
// result: DPDK cannot start twice.
func Start(args []string, cfg EAL) error {
	eal.mu.Lock()
	defer eal.mu.Unlock()
	if eal.cleaned {
		return errors.New("dpdk: the EAL was cleaned up; it cannot start again in this process")
	}
	if eal.started {
		return eal.err
	}
	eal.started = true
	cfg.defaults()
	if err := cfg.check(); err != nil {
		eal.err = fmt.Errorf("dpdk: %w", err)
		return eal.err
	}
	if err := checkLayout(); err != nil {
		eal.err = err
		return err
	}
	eal.cfg = cfg
	eal.args = normalizeArgs(append([]string(nil), args...))
	eal.work = make(chan func())
	res := make(chan error)
	go mainThread(eal.args, res)
	eal.err = <-res
	if eal.err == nil {
		ports.AtExit(Cleanup)
	}
	return eal.err
}

func mainThread(args []string, res chan<- error) {
	// Never unlocked: the goroutine ends with the EAL and the runtime then
	// retires the thread instead of reusing a thread DPDK has claimed.
	runtime.LockOSThread()
	argv := make([]*C.char, 0, len(args)+2)
	argv = append(argv, C.CString("linerate"))
	for _, a := range args {
		// Never freed: the EAL may keep pointers into argv.
		argv = append(argv, C.CString(a))
	}
	cargv := (**C.char)(C.calloc(C.size_t(len(argv)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	copy(unsafe.Slice(cargv, len(argv)+1), argv)
	if rc := C.lr_eal_init(C.int(len(argv)), cargv); rc < 0 {
		res <- fmt.Errorf("dpdk: rte_eal_init %q: %s", args, strerror(-rc))
		return
	}
	res <- nil
	for f := range eal.work {
		f()
	}
}

// onMain runs f on the EAL main thread and waits.
func onMain(f func()) {
	done := make(chan struct{})
	eal.work <- func() { f(); close(done) }
	<-done
}

// Running reports whether the EAL is up.
func Running() bool {
	eal.mu.Lock()
	defer eal.mu.Unlock()
	return eal.started && eal.err == nil && !eal.cleaned
}

// Args are the arguments the EAL started with.
func Args() []string {
	eal.mu.Lock()
	defer eal.mu.Unlock()
	return append([]string(nil), eal.args...)
}

// Cleanup closes every port still open and ends the EAL (rte_eal_cleanup) on its
// main thread. Call it once the process is done with DPDK: the CLI does at exit
// (through ports.RunAtExit), tests from TestMain. The EAL cannot start again.
func Cleanup() {
	eal.mu.Lock()
	defer eal.mu.Unlock()
	if !eal.started || eal.err != nil || eal.cleaned {
		return
	}
	eal.cleaned = true
	for _, p := range openPorts() {
		_ = p.Close()
	}
	onMain(func() { C.rte_eal_cleanup() })
	close(eal.work)
}

func strerror(e C.int) string {
	return fmt.Sprintf("%s (%d)", C.GoString(C.rte_strerror(e)), int(e))
}

func errnoErr(what string, rc C.int) error {
	if rc < 0 {
		rc = -rc
	}
	return fmt.Errorf("%s: %s", what, strerror(rc))
}

// checkLayout makes sure that the C side was built from this packet package:
// lr_meta.h is generated from it (go generate ./appliance/packet), and make
// lint and metagen's tests fail when the committed header is stale. A build
// from a tree edited without regenerating would still corrupt every packet, so
// the check stays: the version, which processes sharing packet memory will
// compare, and field by field, which also catches a field moved without a
// version bump. It runs once, before the first packet.
func checkLayout() error {
	if C.LR_META_VERSION != packet.MetaVersion {
		return fmt.Errorf("dpdk: lr_meta.h is packet metadata version %d, packet.MetaVersion is %d: "+
			"run go generate ./appliance/packet", C.LR_META_VERSION, packet.MetaVersion)
	}
	return sameLayout(reflect.TypeFor[packet.Packet](), reflect.TypeFor[C.struct_lr_meta]())
}

// sameLayout compares Go struct g with the cgo view of its generated C mirror c:
// size, and each field's name (InPort: in_port, own.state: own_state), offset
// and size.
func sameLayout(g, c reflect.Type) error {
	gf, cf := flatFields(g, "", 0), flatFields(c, "", 0)
	if g.Size() != c.Size() || len(gf) != len(cf) {
		return fmt.Errorf("dpdk: %s has %d bytes in %d fields, its C mirror %d in %d: run go generate ./appliance/packet",
			g, g.Size(), len(gf), c.Size(), len(cf))
	}
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", ".", "").Replace(s)) }
	for i, f := range gf {
		if f.off != cf[i].off || f.size != cf[i].size || f.name != "_" && norm(f.name) != norm(cf[i].name) {
			return fmt.Errorf("dpdk: %s.%s (%d bytes at %d) is %s (%d bytes at %d) in C: run go generate ./appliance/packet",
				g, f.name, f.size, f.off, cf[i].name, cf[i].size, cf[i].off)
		}
	}
	return nil
}

type layoutField struct {
	name      string
	off, size uintptr
}

// flatFields lists t's fields, nested structs flattened, as metagen lays them
// out in C.
func flatFields(t reflect.Type, prefix string, base uintptr) []layoutField {
	var out []layoutField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, flatFields(f.Type, prefix+f.Name+".", base+f.Offset)...)
			continue
		}
		name := f.Name
		if name != "_" {
			name = prefix + name
		}
		out = append(out, layoutField{name, base + f.Offset, f.Type.Size()})
	}
	return out
}

// lcoreHook makes each engine lcore thread an EAL thread. The engine calls it on
// the lcore's locked thread after pinning it, so the EAL sees the right CPU (and
// NUMA socket) at registration.
//
// Why rte_thread_register and not rte_eal_remote_launch of an exported Go
// function: both put the poll loop on a thread the EAL knows (an lcore id, a
// mempool cache), and a cgo call costs the same on either (about 27 ns here).
// bench/dpdk -lcore-model runs the same forwarding loop both ways, back to back
// on one CPU of a shared 2-CPU VM: per second of the thread's CPU time remote
// launch ran at 1.00–1.08× the registered thread (the machine's run-to-run
// noise), but per second of wall time at 0.57–0.7×: the Go code in a cgo
// callback on a thread DPDK made was off its CPU far more often. Registration
// is faster where it counts, and it keeps the lcores the engine's own
// goroutines, which it already pins, confines the runtime away from, counts in
// GOMAXPROCS, steps in simulations and stops gracefully.
type lcoreHook struct{}

func (lcoreHook) LcoreStart(cpu int) error {
	if rc := C.lr_thread_register(); rc != 0 {
		return errnoErr(fmt.Sprintf("dpdk: register the lcore thread on CPU %d", cpu), rc)
	}
	return nil
}

func (lcoreHook) LcoreStop() { C.rte_thread_unregister() }

// LcoreID is the calling thread's EAL lcore id, or -1 for a thread the EAL does
// not know.
func LcoreID() int {
	id := C.rte_lcore_id()
	if id == C.LCORE_ID_ANY {
		return -1
	}
	return int(id)
}

// RegisterThread makes the calling (locked) thread an EAL thread, as the engine
// does for its lcores; UnregisterThread undoes it. For programs that poll ports
// from their own threads, such as bench/dpdk.
func RegisterThread() error { return lcoreHook{}.LcoreStart(-1) }

// UnregisterThread is the inverse of RegisterThread.
func UnregisterThread() { lcoreHook{}.LcoreStop() }

// startFromSetup starts the EAL from a config's [dpdk] table, or checks that the
// running one is compatible.
func startFromSetup(c EAL, lcores []int, log *slog.Logger) error {
	if Running() {
		if len(c.EALArgs) > 0 || c.Lcores != "" || c.Memory != 0 {
			log.Debug("dpdk: the EAL is already running; this config's EAL keys are ignored", "args", Args())
		}
		return nil
	}
	return Start(c.Args(lcores), c)
}

var hookOnce sync.Once

func registerHook() { hookOnce.Do(func() { ports.RegisterLcoreHook(lcoreHook{}) }) }
