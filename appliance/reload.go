package appliance

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/ports"
)

// ReloadResult says what a reload changed.
type ReloadResult struct {
	// Stages are the stages that take a new table, as "pipeline/stage".
	Stages []string
	// Ports are the ports that take a new table (ports.Reloader: the xdp
	// port's match rules).
	Ports []string
}

// Reload applies cfg to the running engine without dropping a packet: the
// stages whose tables changed take their new tables (plugins.Reloader), on
// their lcores, between bursts, and so do the ports that reload
// (ports.Reloader). What a running engine cannot change — ports' other keys,
// pools, lcores, pipelines and their chains, the engine, control and metrics
// settings, a plugin's sections — is refused with an error that names the
// key, as is a changed table of a stage or port that cannot reload; nothing
// is applied then. The new file is checked as `linerate validate` checks it
// first, then every reloading port checks its table and every instance of
// every changed stage checks and prepares its own; only when none refused do
// the ports take their tables (one that still fails gives those before it
// their old ones back, and no stage changes) and then the stages theirs,
// which cannot fail.
func (e *Engine) Reload(cfg *config.File) (ReloadResult, error) {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	plan, err := e.planReload(cfg)
	if err != nil {
		return ReloadResult{}, err
	}
	commits, err := e.prepareStages(plan.stages)
	if err != nil {
		return ReloadResult{}, err
	}
	var res ReloadResult
	for i, pc := range plan.ports {
		if err := pc.r.Reload(pc.table); err != nil {
			e.rollbackPorts(plan.ports[:i])
			return ReloadResult{}, fmt.Errorf("%s: port %q: %w", pc.where, pc.name, err)
		}
		res.Ports = append(res.Ports, pc.name)
	}
	for _, c := range commits {
		if err := e.Do(c.in.lc.id, func() {
			c.in.ctx.Stage = c.k
			c.fn()
		}); err != nil {
			return res, err // the engine stopped: nothing runs the new tables, or the old
		}
	}
	for _, c := range plan.stages {
		res.Stages = append(res.Stages, c.name)
	}
	e.cur = cfg
	e.reloads.Add(1)
	return res, nil
}

// stageCommit is what one instance of a stage prepared, to take it.
type stageCommit struct {
	in *instance
	k  int
	fn func()
}

// prepareStages has every instance of every changed stage check and prepare
// its new table, on its lcore; none takes it. The caller holds reloadMu.
func (e *Engine) prepareStages(changes []reloadChange) ([]stageCommit, error) {
	var commits []stageCommit
	for _, c := range changes {
		for _, in := range c.pl.instances {
			var (
				fn  func()
				err error
			)
			r := in.stages[c.k].st.(plugins.Reloader)
			if derr := e.Do(in.lc.id, func() {
				in.ctx.Stage = c.k
				fn, err = r.Reload(&in.ctx, c.table)
			}); derr != nil {
				err = derr
			} else if err != nil {
				err = fmt.Errorf("%s: stage %q: %w", c.table.Where(), in.stages[c.k].name, err)
			} else if fn == nil {
				err = fmt.Errorf("%s: stage %q: its Reload returned no commit", c.table.Where(), in.stages[c.k].name)
			}
			if err != nil {
				return nil, err
			}
			commits = append(commits, stageCommit{in, c.k, fn})
		}
	}
	return commits, nil
}

// rollbackPorts gives ports that took a new table their old one back.
func (e *Engine) rollbackPorts(done []portReload) {
	for _, pc := range done {
		if err := pc.r.Reload(pc.old); err != nil {
			e.log.Error("reload: a port could not take its old table back", "port", pc.name, "err", err)
		}
	}
}

// CheckReload says what Reload(cfg) would change, or why it would refuse,
// and changes nothing: every changed stage checks its table as for Reload.
func (e *Engine) CheckReload(cfg *config.File) (ReloadResult, error) {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	plan, err := e.planReload(cfg)
	if err == nil {
		_, err = e.prepareStages(plan.stages)
	}
	var res ReloadResult
	for _, c := range plan.stages {
		res.Stages = append(res.Stages, c.name)
	}
	for _, pc := range plan.ports {
		res.Ports = append(res.Ports, pc.name)
	}
	return res, err
}

// reloadChange is one stage's new table.
type reloadChange struct {
	pl    *pipeline
	k     int
	name  string
	table config.Table
}

// portReload is one port's new table, and its old one for a rollback.
type portReload struct {
	r          ports.Reloader
	name       string
	where      string
	table, old config.Table
}

type reloadPlan struct {
	stages []reloadChange
	ports  []portReload
}

// planReload checks cfg against the running config and lists the stages and
// ports whose tables change. The caller holds reloadMu.
func (e *Engine) planReload(cfg *config.File) (reloadPlan, error) {
	if e.opt.DryRun {
		return reloadPlan{}, errors.New("engine: a dry-run engine cannot reload")
	}
	// A port that reloads checks its own table; the rest of the file is held
	// to the restart rules with the port's old table.
	var plan reloadPlan
	held := cfg
	if len(cfg.Ports) == len(e.cur.Ports) {
		h := *cfg
		h.Ports = slices.Clone(cfg.Ports)
		for i, pe := range e.ports[:len(cfg.Ports)] {
			r, ok := pe.port.(ports.Reloader)
			if !ok || sameTable(e.cur.Ports[i].Table, cfg.Ports[i].Table) {
				continue
			}
			h.Ports[i].Table = e.cur.Ports[i].Table
			plan.ports = append(plan.ports, portReload{r: r, name: cfg.Ports[i].Name, where: cfg.Ports[i].Where(),
				table: cfg.Ports[i].Table, old: e.cur.Ports[i].Table})
		}
		held = &h
	}
	if key := fixedChange(e.cur, held); key != "" {
		return reloadPlan{}, &config.Error{File: cfg.Path, Line: cfg.Line(key), Key: key,
			Err: errors.New("changes only with a restart; a reload changes stages' tables and xdp ports' match rules")}
	}
	for _, pc := range plan.ports {
		if err := pc.r.CheckReload(pc.table); err != nil {
			return reloadPlan{}, fmt.Errorf("%s: port %q: %w", pc.where, pc.name, err)
		}
	}
	// Every stage builds from the new file, as validate builds them.
	dry, err := New(cfg, Options{DryRun: true, Offline: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return reloadPlan{}, err
	}
	_ = dry.Close()

	for i, pc := range cfg.Pipelines {
		pl := e.pipelines[i]
		for k, sc := range pc.Stages {
			if sameTable(e.cur.Pipelines[i].Stages[k].Table, sc.Table) {
				continue
			}
			for _, in := range pl.instances {
				if _, ok := in.stages[k].st.(plugins.Reloader); !ok {
					return reloadPlan{}, fmt.Errorf("%s: stage %q (%s) takes a new table only with a restart",
						sc.Where(), in.stages[k].name, sc.Kind)
				}
			}
			name := pc.Name + "/" + pl.instances[0].stages[k].name
			plan.stages = append(plan.stages, reloadChange{pl, k, name, sc.Table})
		}
	}
	return plan, nil
}

// fixedChange is the first key that differs between a and b outside stage
// tables, or "".
func fixedChange(a, b *config.File) string {
	if k := diff("", reflect.ValueOf(*a), reflect.ValueOf(*b)); k != "" {
		return k
	}
	names := append(a.SectionNames(), b.SectionNames()...)
	for _, n := range names {
		if !sameTable(a.Section(n), b.Section(n)) {
			return n
		}
	}
	return ""
}

var (
	tableType = reflect.TypeFor[config.Table]()
	stageType = reflect.TypeFor[config.Stage]()
)

// diff walks two config values by their toml keys.
func diff(path string, a, b reflect.Value) string {
	switch {
	case a.Type() == tableType:
		if !sameTable(a.Interface().(config.Table), b.Interface().(config.Table)) {
			return path
		}
		return ""
	case a.Type() == stageType:
		sa, sb := a.Interface().(config.Stage), b.Interface().(config.Stage)
		if sa.Kind != sb.Kind {
			return join(path, "kind")
		}
		if sa.Name != sb.Name {
			return join(path, "name")
		}
		return "" // the table is what a reload may change
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			sub := path
			if !f.Anonymous {
				sub = join(path, name)
			}
			if k := diff(sub, a.Field(i), b.Field(i)); k != "" {
				return k
			}
		}
		return ""
	case reflect.Slice:
		for i := range min(a.Len(), b.Len()) {
			if k := diff(path+"["+strconv.Itoa(i)+"]", a.Index(i), b.Index(i)); k != "" {
				return k
			}
		}
		if a.Len() != b.Len() {
			return path + "[" + strconv.Itoa(min(a.Len(), b.Len())) + "]" // the first one added or removed
		}
		return ""
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path
			}
			return ""
		}
		return diff(path, a.Elem(), b.Elem())
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return path
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// sameTable reports whether two tables hold the same keys and values.
func sameTable(a, b config.Table) bool {
	var ma, mb map[string]any
	if a.Decode(&ma) != nil || b.Decode(&mb) != nil {
		return false
	}
	return len(ma) == 0 && len(mb) == 0 || reflect.DeepEqual(ma, mb)
}
