package config

import (
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
)

// Decoding is strict and reports every problem, not just the first. BurntSushi
// parses the document and converts leaf values (PrimitiveDecode); config walks
// tables and arrays itself, one key at a time, so that it knows the full path of
// each key (with array indices) and can name the line of any key that is
// unknown, of the wrong type or out of range.

// document is one parsed file, shared by the File and all its Tables.
type document struct {
	name string
	ix   *index
	mu   sync.Mutex // PrimitiveDecode writes into md
	md   toml.MetaData
}

// where is the place of a table in its file.
type where struct {
	file string
	path string // "ports[1]"
	line int
}

// Where is "file:line" of the table's header, or "" for a table not read from a
// file.
func (w where) Where() string {
	switch {
	case w.file == "":
		return ""
	case w.line == 0:
		return w.file
	}
	return w.file + ":" + strconv.Itoa(w.line)
}

// setWhere is how decoding fills in an embedded where, which reflection cannot
// set, being unexported.
func (w *where) setWhere(v where) { *w = v }

// Table is a table whose keys are decoded later by their owner: a port's driver,
// a pipeline's stage, or any config struct that defers part of itself. Embedded
// in a struct, it takes the keys the struct does not declare; as a named field,
// it takes a whole sub-table.
//
// It satisfies plugins.Config and ports.Config. The zero Table has no keys.
type Table struct {
	where
	doc  *document
	keys map[string]toml.Primitive
	// taken are the keys the enclosing struct took (name, driver …), offered
	// as suggestions when a key is misspelt.
	taken []string
}

// Path is the table's key path, as in error messages: "pipelines[0].stages[2]".
func (t Table) Path() string { return t.path }

// Decode decodes the table's keys into v, a non-nil pointer to a struct (or to a
// map with string keys). Fields take keys by their toml tag exactly, or, when
// untagged, by their name in any case. A key v has no field for, a value of the
// wrong type or one its UnmarshalText refuses is an error naming the file, the
// line and the full key path; all of them are returned together, as Errors.
// Fields without a key in the table keep what v held, so set defaults first.
//
// Decode can be called any number of times, from any goroutine: once per lcore
// is the normal case. Values decoded into an interface{} field are copies.
func (t Table) Decode(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("config: Decode needs a non-nil pointer, not %T", v)
	}
	if t.doc == nil {
		return nil
	}
	t.doc.mu.Lock()
	defer t.doc.mu.Unlock()
	d := &decoder{doc: t.doc, taken: t.taken, tablePath: t.path}
	ev := rv.Elem()
	for ev.Kind() == reflect.Pointer {
		if ev.IsNil() {
			ev.Set(reflect.New(ev.Type().Elem()))
		}
		ev = ev.Elem()
	}
	switch {
	case ev.Kind() == reflect.Struct && !isLeaf(ev.Type()):
		d.fields(t.keys, t.path, ev)
	case ev.Kind() == reflect.Map && ev.Type().Key().Kind() == reflect.String:
		d.entries(t.keys, t.path, ev)
	default:
		return fmt.Errorf("config: cannot decode table %s into %T", t.path, v)
	}
	return d.errs.Err()
}

// ParseTable parses data as a single table, for tests of drivers and stages:
// ParseTable("link", []byte(`delay = "1ms"`)) gives a Table whose Decode works as
// it does for a stage table read from a config file.
func ParseTable(name string, data []byte) (Table, error) {
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return Table{}, syntaxError(name, data, err)
	}
	doc := &document{name: name, md: md, ix: buildIndex(data)}
	return Table{where: where{file: name}, doc: doc, keys: top}, nil
}

var (
	tableType     = reflect.TypeFor[Table]()
	whereType     = reflect.TypeFor[where]()
	primitiveType = reflect.TypeFor[toml.Primitive]()
	durationType  = reflect.TypeFor[time.Duration]()
	tomlUnmarshal = reflect.TypeFor[toml.Unmarshaler]()
	textUnmarshal = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// isLeaf reports whether values of t decode themselves from one TOML value.
func isLeaf(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(tomlUnmarshal) || pt.Implements(tomlUnmarshal) ||
		t.Implements(textUnmarshal) || pt.Implements(textUnmarshal)
}

type decoder struct {
	doc    *document
	errs   Errors
	failed map[string]bool // key paths with an error
	// taken are more names to suggest for unknown keys directly in the table
	// at tablePath.
	taken     []string
	tablePath string
}

func (d *decoder) fail(path string, err error) {
	d.errs = append(d.errs, &Error{File: d.doc.name, Line: d.doc.ix.line(path), Key: path, Err: err})
	if d.failed == nil {
		d.failed = map[string]bool{}
	}
	d.failed[path] = true
}

// raw is the parsed value behind p: map[string]any, []map[string]any, []any,
// string, int64, float64, bool or time.Time. It belongs to the parse tree: read
// it, never change it.
func (d *decoder) raw(p toml.Primitive) any {
	var v any
	_ = d.doc.md.PrimitiveDecode(p, &v) // decoding into any cannot fail
	return v
}

func (d *decoder) value(p toml.Primitive, path string, rv reflect.Value) {
	t := rv.Type()
	switch {
	case t == tableType:
		if m, ok := d.table(p, path); ok {
			rv.Set(reflect.ValueOf(d.newTable(path, m)))
		}
		return
	case t == primitiveType:
		d.fail(path, errors.New("cannot decode into toml.Primitive: use config.Table to defer decoding"))
		return
	case t.Kind() == reflect.Pointer:
		if rv.IsNil() {
			rv.Set(reflect.New(t.Elem()))
		}
		d.value(p, path, rv.Elem())
		return
	case t.Implements(tomlUnmarshal) || reflect.PointerTo(t).Implements(tomlUnmarshal):
		d.leaf(p, path, rv)
		return
	case isLeaf(t):
		// Strictness: text values come from strings (or TOML date-times for
		// time.Time), not from numbers BurntSushi would print into text.
		switch raw := d.raw(p); raw.(type) {
		case string, time.Time:
		default:
			d.fail(path, fmt.Errorf("expected a string, found %s", describe(raw)))
			return
		}
		d.leaf(p, path, rv)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if m, ok := d.table(p, path); ok {
			d.fields(m, path, rv)
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			d.fail(path, fmt.Errorf("cannot decode into Go type %s: map keys must be strings", t))
			return
		}
		if m, ok := d.table(p, path); ok {
			d.entries(m, path, rv)
		}
	case reflect.Slice, reflect.Array:
		elems, ok := d.array(p, path)
		if !ok {
			return
		}
		if t.Kind() == reflect.Array {
			if len(elems) != rv.Len() {
				d.fail(path, fmt.Errorf("expected %d values, found %d", rv.Len(), len(elems)))
				return
			}
		} else {
			rv.Set(reflect.MakeSlice(t, len(elems), len(elems)))
		}
		for i, e := range elems {
			d.value(e, path+"["+strconv.Itoa(i)+"]", rv.Index(i))
		}
	case reflect.Interface:
		if t.NumMethod() != 0 {
			d.fail(path, fmt.Errorf("cannot decode into Go type %s", t))
			return
		}
		if raw := deepCopy(d.raw(p)); raw != nil {
			rv.Set(reflect.ValueOf(raw))
		}
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if err := checkScalar(t, d.raw(p)); err != nil {
			d.fail(path, err)
			return
		}
		d.leaf(p, path, rv)
	default:
		d.fail(path, fmt.Errorf("cannot decode into Go type %s", t))
	}
}

// leaf lets BurntSushi convert one value (range checks, UnmarshalText,
// UnmarshalTOML, time.Duration, date-times).
func (d *decoder) leaf(p toml.Primitive, path string, rv reflect.Value) {
	if err := d.doc.md.PrimitiveDecode(p, rv.Addr().Interface()); err != nil {
		d.fail(path, cleanError(err))
	}
}

// cleanError takes BurntSushi's position and key off err: they are the wrong ones
// inside arrays of tables, and the caller adds its own.
func cleanError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return errors.New(pe.Message)
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "toml: "); ok {
		msg = rest
		if i := strings.Index(msg, "): "); i >= 0 && strings.Contains(msg[:i], "last key") {
			msg = msg[i+3:]
		}
	}
	return errors.New(msg)
}

func (d *decoder) table(p toml.Primitive, path string) (map[string]toml.Primitive, bool) {
	raw := d.raw(p)
	if _, ok := raw.(map[string]any); !ok {
		d.fail(path, fmt.Errorf("expected a table, found %s", describe(raw)))
		return nil, false
	}
	var m map[string]toml.Primitive
	if err := d.doc.md.PrimitiveDecode(p, &m); err != nil {
		d.fail(path, cleanError(err))
		return nil, false
	}
	return m, true
}

func (d *decoder) array(p toml.Primitive, path string) ([]toml.Primitive, bool) {
	raw := d.raw(p)
	switch raw.(type) {
	case []any, []map[string]any:
	default:
		d.fail(path, fmt.Errorf("expected an array, found %s", describe(raw)))
		return nil, false
	}
	var a []toml.Primitive
	if err := d.doc.md.PrimitiveDecode(p, &a); err != nil {
		d.fail(path, cleanError(err))
		return nil, false
	}
	return a, true
}

func (d *decoder) newTable(path string, keys map[string]toml.Primitive) Table {
	return Table{where: where{file: d.doc.name, path: path, line: d.doc.ix.line(path)}, doc: d.doc, keys: keys}
}

// keysInOrder lists m's keys by line, so errors come out in file order.
func (d *decoder) keysInOrder(m map[string]toml.Primitive, path string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(d.doc.ix.line(joinKey(path, a)), d.doc.ix.line(joinKey(path, b))), cmp.Compare(a, b))
	})
	return keys
}

// fields decodes a table into struct rv.
func (d *decoder) fields(m map[string]toml.Primitive, path string, rv reflect.Value) {
	fs := fieldsOf(rv.Type())
	var rest map[string]toml.Primitive
	setBy := map[int]string{}
	for _, k := range d.keysInOrder(m, path) {
		kp := joinKey(path, k)
		f := fs.match(k)
		if f == nil {
			if fs.table != nil {
				if rest == nil {
					rest = map[string]toml.Primitive{}
				}
				rest[k] = m[k]
				continue
			}
			names := fs.names()
			if path == d.tablePath {
				names = append(names, d.taken...)
			}
			d.fail(kp, unknownKey(k, names))
			continue
		}
		if prev, dup := setBy[f.num]; dup {
			d.fail(kp, fmt.Errorf("sets the same field as key %q", prev))
			continue
		}
		setBy[f.num] = k
		d.value(m[k], kp, fieldByIndex(rv, f.index))
	}
	if fs.table != nil {
		t := d.newTable(path, rest)
		t.taken = fs.names()
		fieldByIndex(rv, fs.table).Set(reflect.ValueOf(t))
	}
	if fs.where != nil && rv.CanAddr() {
		if s, ok := rv.Addr().Interface().(interface{ setWhere(where) }); ok {
			s.setWhere(where{file: d.doc.name, path: path, line: d.doc.ix.line(path)})
		}
	}
}

// entries decodes a table into map rv.
func (d *decoder) entries(m map[string]toml.Primitive, path string, rv reflect.Value) {
	t := rv.Type()
	if rv.IsNil() {
		rv.Set(reflect.MakeMapWithSize(t, len(m)))
	}
	for _, k := range d.keysInOrder(m, path) {
		ev := reflect.New(t.Elem()).Elem()
		n := len(d.errs)
		d.value(m[k], joinKey(path, k), ev)
		if len(d.errs) == n {
			rv.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
	}
}

func fieldByIndex(rv reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				rv.Set(reflect.New(rv.Type().Elem()))
			}
			rv = rv.Elem()
		}
		rv = rv.Field(x)
	}
	return rv
}

type field struct {
	name   string // the toml tag, or the Go field name
	tagged bool
	index  []int
	num    int
}

type fieldSet struct {
	list         []field // shallower fields first, as encoding/json ranks them
	table, where []int   // the embedded Table and where, if any
}

// match finds the field for key: a tag matches exactly, an untagged field by its
// name in any case (as BurntSushi does). The shallowest match wins.
func (fs *fieldSet) match(key string) *field {
	for i := range fs.list {
		f := &fs.list[i]
		if f.tagged && f.name == key || !f.tagged && strings.EqualFold(f.name, key) {
			return f
		}
	}
	return nil
}

// names lists the keys the struct accepts, as a user would write them.
func (fs *fieldSet) names() []string {
	out := make([]string, 0, len(fs.list))
	for _, f := range fs.list {
		if f.tagged {
			out = append(out, f.name)
		} else {
			out = append(out, strings.ToLower(f.name))
		}
	}
	return out
}

var fieldCache sync.Map // reflect.Type → *fieldSet

func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			idx := append(slices.Clone(index), i)
			name, _, _ := strings.Cut(sf.Tag.Get("toml"), ",")
			if name == "-" {
				continue
			}
			if sf.Anonymous && name == "" {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				switch {
				case sf.Type == tableType:
					if fs.table == nil {
						fs.table = idx
					}
					continue
				case sf.Type == whereType:
					fs.where = idx
					continue
				case ft.Kind() == reflect.Struct && !isLeaf(ft):
					if len(idx) < 16 { // guards against recursive embedding
						walk(ft, idx)
					}
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			f := field{name: name, tagged: name != "", index: idx}
			if !f.tagged {
				f.name = sf.Name
			}
			fs.list = append(fs.list, f)
		}
	}
	walk(t, nil)
	slices.SortStableFunc(fs.list, func(a, b field) int { return len(a.index) - len(b.index) })
	for i := range fs.list {
		fs.list[i].num = i
	}
	v, _ := fieldCache.LoadOrStore(t, fs)
	return v.(*fieldSet)
}

func unknownKey(key string, names []string) error {
	if best := Suggest(key, names); best != "" {
		return fmt.Errorf("unknown key (did you mean %q?)", best)
	}
	return errors.New("unknown key")
}

// Suggest is the name of names closest to s, within two edits (a swap of
// neighbours is one), or "" when none is that close: for "did you mean".
func Suggest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), n); d < bestD && d < len(s) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, with a swap of neighbours counting
// as one edit ("delya" → "delay").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			c := 1
			if ra[i-1] == rb[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// checkScalar says whether a TOML value fits a Go bool, string or number.
func checkScalar(t reflect.Type, raw any) error {
	k := t.Kind()
	switch {
	case k == reflect.Bool:
		if _, ok := raw.(bool); ok {
			return nil
		}
		return fmt.Errorf("expected a boolean, found %s", describe(raw))
	case k == reflect.String:
		if _, ok := raw.(string); ok {
			return nil
		}
		return fmt.Errorf("expected a string, found %s", describe(raw))
	case k == reflect.Float32 || k == reflect.Float64:
		switch raw.(type) {
		case float64, int64:
			return nil
		}
		return fmt.Errorf("expected a number, found %s", describe(raw))
	case t == durationType:
		switch raw.(type) {
		case string, int64:
			return nil
		}
		return fmt.Errorf("expected a duration such as \"1ms\", found %s", describe(raw))
	}
	n, ok := raw.(int64)
	if !ok {
		return fmt.Errorf("expected an integer, found %s", describe(raw))
	}
	if n < 0 && k >= reflect.Uint && k <= reflect.Uint64 {
		return fmt.Errorf("%d is negative", n)
	}
	return nil
}

// describe names a TOML value's type for messages, with the value when short.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case time.Time:
		return "date-time"
	case []any:
		return "array"
	case []map[string]any:
		return "array of tables"
	case map[string]any:
		return "table"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}

// deepCopy copies a parsed value, so a caller changing what Decode gave it cannot
// change the next Decode.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []map[string]any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = deepCopy(e)
		}
		return a
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}
