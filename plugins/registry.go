package plugins

import (
	"fmt"
	"sort"
	"sync"
)

// Factory makes one stage instance for one lcore.
type Factory func(s *Setup) (Stage, error)

// Kind describes a registered stage kind.
type Kind struct {
	Name    string // namespaced: "forward", "ioam.encap", "stamp.reflector"
	Summary string // one line for `linerate help stages`
	New     Factory
}

var (
	kindsMu sync.RWMutex
	kinds   = map[string]Kind{}
)

// Register adds a stage kind. Plugin packages call it from init. Registering a
// name twice panics: it is a programming error.
func Register(k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if k.Name == "" || k.New == nil {
		panic("plugins: Register needs a name and a factory")
	}
	if _, dup := kinds[k.Name]; dup {
		panic(fmt.Sprintf("plugins: stage kind %q registered twice", k.Name))
	}
	kinds[k.Name] = k
}

// Lookup finds a kind.
func Lookup(name string) (Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Kinds lists the registered kinds by name.
func Kinds() []Kind {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
