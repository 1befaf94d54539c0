package external

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

var reasonRE = regexp.MustCompile(`^[a-z0-9_]{1,48}$`)

// hostileNames is what a hostile plugin announces: thousands of distinct
// names, bytes no label may hold, upper case, one name in many spellings,
// empty and overlong names, and linerate's own reasons.
func hostileNames(tag string) []string {
	names := []string{"", "___", "tx_full", "Odd-Length", "odd_length", "ODD LENGTH", "odd\x00length",
		"\xff\xfe" + tag, strings.Repeat("x", 10_000) + tag, "{le=\"+Inf\"}", "é" + tag}
	for i := 0; i < 5000; i++ {
		names = append(names, fmt.Sprintf("%s_%d\n\"", tag, i))
	}
	return names
}

// TestHostileReasonNames: a plugin's reason names become linerate's drop
// reasons, but never more than maxPluginReasons per stage, each sanitised to
// [a-z0-9_], at most 48 bytes; the rest, and a name with nothing left, fall
// to plugin_reason_overflow; linerate's own names stay theirs; a second
// generation of the same plugin adds nothing.
func TestHostileReasonNames(t *testing.T) {
	before := packet.NumReasons()
	var pr pluginReasons
	names := hostileNames("hostile_a")
	table := pr.table(names)
	if len(table) != len(names) {
		t.Fatalf("a table of %d for %d names", len(table), len(names))
	}
	added := packet.NumReasons() - before
	if added > maxPluginReasons || len(pr.added) > maxPluginReasons {
		t.Errorf("%d reasons registered (%d by the stage), at most %d", added, len(pr.added), maxPluginReasons)
	}
	if table[0] != reasonOverflow || table[1] != reasonOverflow {
		t.Errorf("the empty names are %v, %v: want %v", table[0], table[1], reasonOverflow)
	}
	if table[2] != packet.ReasonTxFull {
		t.Errorf("tx_full is %v", table[2])
	}
	// Three spellings of one name, one reason.
	if table[3] != table[4] || table[4] != table[5] || table[4] != table[6] || table[4].String() != "odd_length" {
		t.Errorf("odd_length spelt four ways: %v %v %v %v", table[3], table[4], table[5], table[6])
	}
	distinct := map[packet.Reason]bool{}
	for i, r := range table {
		distinct[r] = true
		if name := r.String(); !reasonRE.MatchString(name) {
			t.Errorf("name %d (%q) is the reason %q", i, names[i], name)
		}
	}
	if !distinct[reasonOverflow] || len(distinct) > maxPluginReasons+2 { // + tx_full, the overflow
		t.Errorf("%d distinct reasons for %d names, overflow among them: %v", len(distinct), len(names), distinct[reasonOverflow])
	}
	// A restart announces them again: nothing new.
	n := packet.NumReasons()
	if again := pr.table(names); fmt.Sprint(again) != fmt.Sprint(table) || packet.NumReasons() != n {
		t.Errorf("the second generation's table differs, or registered %d more", packet.NumReasons()-n)
	}
	// Numbers the plugin never announced.
	if r := reasonOf(table, uint16(len(table))); r != reasonOverflow {
		t.Errorf("reason %d of %d: %v", len(table), len(table), r)
	}
}

// dropEnv is the engine's Env as the stage sees it: Drop counts by reason.
type dropEnv struct {
	*stagetest.Env
	drops map[string]int
}

func (e *dropEnv) Drop(h packet.Handle, r packet.Reason) {
	e.drops[r.String()]++
	e.Free(h)
}

// TestHostilePluginDrops: a hostile plugin drops packets through the rings
// by every reason number, those it announced (sanitised, capped) and those
// it did not: each drop reaches the engine as the stage's drop by a named,
// bounded reason (what the DROPS column, the DROP REASON table and run
// --json show), with the window and result checks' drops named too, and
// no buffer is lost.
func TestHostilePluginDrops(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "hostile-drops", Buffers: 1024, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	}()
	in, peer := lendRigOf(t, pool, false)
	var pr pluginReasons
	in.l.reasons = pr.table(hostileNames("hostile_b"))
	env := &dropEnv{Env: h.Env, drops: map[string]int{}}
	ctx := h.Ctx
	ctx.Env = env
	rng := rand.New(rand.NewPCG(3, 9))
	want := map[string]int{}
	var lentTail uint16
	var out packet.Burst
	for round := 0; round < 200; round++ {
		var bu packet.Burst
		pool.Alloc(&bu, 1+rng.IntN(packet.MaxBurst))
		for _, hd := range bu.Handles() {
			hd.P().Append(60)
		}
		in.Process(&ctx, &bu)
		rx, tx := peer.C2S[0], peer.S2C[0]
		for ; lentTail != rx.Head(); lentTail++ {
			d := rx.Load(lentTail)
			r := memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length}
			switch k := rng.IntN(4); k {
			case 0: // continue
			case 1:
				r.Offset += 1 << 20
				want["plugin_bad_window"]++
			default:
				n := uint16(rng.IntN(len(in.l.reasons) + 100))
				r.Metadata = memif.ExtVerdict(memif.ExtDrop, n)
				want[reasonOf(in.l.reasons, n).String()]++
			}
			*tx.D(lentTail) = r
		}
		rx.SetTail(lentTail)
		tx.SetTail(lentTail)
		for in.done != in.head {
			out.N = 0
			in.Produce(&ctx, &out)
			stagetest.Free(out.Handles()...)
		}
		h.Env.Flush()
	}
	if fmt.Sprint(env.drops) != fmt.Sprint(want) {
		t.Errorf("drops by reason %v, want %v", env.drops, want)
	}
	if env.drops["plugin_reason_overflow"] == 0 || len(env.drops) < 10 {
		t.Errorf("the rounds did not drop by enough reasons: %v", env.drops)
	}
	if len(env.drops) > maxPluginReasons+3 { // + tx_full, the overflow, bad_window
		t.Errorf("%d reasons: more than a stage may add", len(env.drops))
	}
	for name := range env.drops {
		if !reasonRE.MatchString(name) {
			t.Errorf("reason %q", name)
		}
	}
	if n := pool.InUse(); n != 0 {
		t.Errorf("%d buffers in use", n)
	}
}

// TestHostileCounters: a plugin whose Stats names thousands of counters,
// with bytes no label may hold, shows at most maxPluginCounters of them
// (and the overflow), each sanitised, and every count still summed.
func TestHostileCounters(t *testing.T) {
	in := map[string]uint64{"sampled": 7, "Sampled": 1, "{le=\"+Inf\"}": 2, "": 3}
	var total uint64 = 13
	for i := 0; i < 3000; i++ {
		in[fmt.Sprintf("c%04d\n\xff", i)] = 1
		total++
	}
	out := ownCounters(in)
	if len(out) > maxPluginCounters+1 || out["plugin_counter_overflow"] == 0 {
		t.Errorf("%d counters shown, overflow %d", len(out), out["plugin_counter_overflow"])
	}
	var sum uint64
	for name, v := range out {
		sum += v
		if !reasonRE.MatchString(name) {
			t.Errorf("counter %q", name)
		}
	}
	if sum != total || out["sampled"] != 8 {
		t.Errorf("sum %d, want %d; sampled %d, want 8 (two spellings)", sum, total, out["sampled"])
	}
}
