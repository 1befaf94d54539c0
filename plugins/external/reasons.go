package external

import (
	"sync"

	"github.com/linerate/linerate/appliance/packet"
)

// A plugin's drop reasons become linerate's own, so that its drops show by
// name wherever drops do: the stage's DROPS column, the DROP REASON table,
// run --json and /metrics. The plugin announces its reason names in
// Capabilities (its registry, by number) and names one by number in each
// drop's verdict word. A plugin is not trusted with linerate's registry,
// which is fixed in size, nor with the cardinality of its metrics: names are
// sanitised, each stage may add at most maxPluginReasons of its own, and
// what is left over is counted under one reason, plugin_reason_overflow.

const (
	// maxPluginReasons is how many names one external stage's plugins may
	// add to linerate's reasons, over every generation.
	maxPluginReasons = 32
	// reasonReserve keeps this many of packet.MaxReasons for linerate:
	// plugins never fill the registry (a full registry panics).
	reasonReserve = 16
	// maxReasonName bounds a name's length, in bytes.
	maxReasonName = 48
	// maxReasonNumber: a verdict word names a reason in 16 bits.
	maxReasonNumber = 1 << 16
)

// reasonsMu orders the checks of the registry's room with the
// registrations: external stages register from their supervisors'
// goroutines (a restart), and a full registry panics.
var reasonsMu sync.Mutex

// pluginReasons is what one stage's plugins added to linerate's reasons,
// by name.
type pluginReasons struct {
	added map[string]packet.Reason
}

// table maps the reason numbers a plugin announced (names, its registry in
// order) to linerate's reasons. A name linerate knows is that reason; a new
// one is registered while the stage has room, and is
// plugin_reason_overflow after that, as a name that sanitises to nothing
// is. Numbers past the table are the overflow reason too (reason).
func (pr *pluginReasons) table(names []string) []packet.Reason {
	if pr.added == nil {
		pr.added = map[string]packet.Reason{}
	}
	names = names[:min(len(names), maxReasonNumber)]
	out := make([]packet.Reason, len(names))
	reasonsMu.Lock()
	defer reasonsMu.Unlock()
	for i, raw := range names {
		out[i] = pr.reason(raw)
	}
	return out
}

func (pr *pluginReasons) reason(raw string) packet.Reason {
	name := reasonName(raw)
	if name == "" {
		return reasonOverflow
	}
	if r, ok := pr.added[name]; ok {
		return r
	}
	if r, ok := packet.LookupReason(name); ok {
		return r
	}
	if len(pr.added) >= maxPluginReasons || packet.NumReasons() >= packet.MaxReasons-reasonReserve {
		return reasonOverflow
	}
	r := packet.RegisterReason(name)
	pr.added[name] = r
	return r
}

// reasonName is raw as a reason name may be: Prometheus label style,
// [a-z0-9_], upper case lowered, every other byte an underscore, at most
// maxReasonName bytes.
func reasonName(raw string) string {
	raw = raw[:min(len(raw), maxReasonName)]
	b := []byte(raw)
	letters := 0
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			letters++
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
			letters++
		default:
			b[i] = '_'
		}
	}
	if letters == 0 {
		return ""
	}
	return string(b)
}

// reasonOf is the reason a plugin's drop names by number n, on a link whose
// plugin announced table.
func reasonOf(table []packet.Reason, n uint16) packet.Reason {
	if int(n) < len(table) {
		return table[n]
	}
	return reasonOverflow
}
