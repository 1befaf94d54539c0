package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"

	"github.com/BurntSushi/toml"
)

// Section is a top-level table or array of tables that belongs to a driver or a
// plugin, as a Caddy app owns its part of the config: [dpdk] to the dpdk
// driver, [[routes]] and [[neighbors]] to routed mode. The owner registers it
// from its package's init; a file that has one no owner registered gets an
// unknown-key error.
type Section struct {
	Name string // the top-level key
	// Check decodes and checks the section when the file is parsed, strictly
	// (t.Decode), with the file's own tables at hand (its ports, say). Its
	// errors, as Errors or made with t.Error, name the file, line and key.
	// Nil leaves the keys to the owner, which decodes them when it starts.
	Check func(f *File, t Table) error
	// Absent, when set, says the section's owner is not in this binary and
	// how to get it; such a section is accepted unchecked.
	Absent string
}

var sections struct {
	sync.Mutex
	m map[string]Section
}

// RegisterSection adds a top-level section. Owners call it from init.
func RegisterSection(s Section) {
	sections.Lock()
	defer sections.Unlock()
	if sections.m == nil {
		sections.m = map[string]Section{}
	}
	if prev, dup := sections.m[s.Name]; dup && prev.Absent == "" && s.Absent == "" {
		panic(fmt.Sprintf("config: section %q registered twice", s.Name))
	}
	if prev, dup := sections.m[s.Name]; dup && s.Absent != "" && prev.Absent == "" {
		return // the owner is here after all
	}
	sections.m[s.Name] = s
}

func section(name string) (Section, bool) {
	sections.Lock()
	defer sections.Unlock()
	s, ok := sections.m[name]
	return s, ok
}

func sectionNames() []string {
	sections.Lock()
	defer sections.Unlock()
	names := make([]string, 0, len(sections.m))
	for n := range sections.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Section is the file's top-level key name as a table holding that one key:
// its owner decodes it into a struct with a field of that name, e.g.
// struct{ Routes []Route `toml:"routes"` }, and errors name "routes[1].via".
// A file without it gives an empty Table.
func (f *File) Section(name string) Table {
	p, ok := f.sections[name]
	if !ok || f.doc == nil {
		return Table{}
	}
	return Table{where: where{file: f.doc.name}, doc: f.doc, keys: map[string]toml.Primitive{name: p}}
}

// checkSections holds the keys no field of File took to the sections
// registered for them.
func (f *File) checkSections(d *decoder, rest map[string]toml.Primitive) Errors {
	f.sections = rest
	var errs Errors
	for _, k := range d.keysInOrder(rest, "") {
		s, ok := section(k)
		if !ok {
			known := slices.Concat(fieldsOf(reflect.TypeFor[File]()).names(), sectionNames())
			d.fail(k, unknownKey(k, known))
			continue
		}
		if s.Check == nil || s.Absent != "" {
			continue
		}
		if err := s.Check(f, f.Section(k)); err != nil {
			errs = append(errs, asErrors(f, k, err)...)
		}
	}
	return errs
}

// asErrors turns an owner's error into Errors, placing one that is not
// already placed at the section's key.
func asErrors(f *File, key string, err error) Errors {
	switch e := err.(type) {
	case Errors:
		return e
	case *Error:
		return Errors{e}
	}
	line := 0
	if f.doc != nil {
		line = f.doc.ix.line(key)
	}
	return Errors{{File: f.Path, Line: line, Key: key, Err: err}}
}

// Error is an error about key (a path below t, "" for t itself) that names
// the file, line and full key path: for owners' checks after Decode.
func (t Table) Error(key string, err error) *Error {
	path := key
	switch {
	case key == "":
		path = t.path
	case t.path != "":
		path = t.path + "." + key
	}
	e := &Error{File: t.file, Key: path, Err: err}
	if t.doc != nil {
		e.Line = t.doc.ix.line(path)
	}
	return e
}

// Only is t with its key name alone, or an empty Table when t has none: a
// section out of a table parsed whole (ParseTable), as File.Section gives it.
func (t Table) Only(name string) Table {
	p, ok := t.keys[name]
	if !ok {
		return Table{}
	}
	return Table{where: t.where, doc: t.doc, keys: map[string]toml.Primitive{name: p}}
}

// SectionNames lists the sections the file has.
func (f *File) SectionNames() []string {
	names := make([]string, 0, len(f.sections))
	for n := range f.sections {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Line is the line of key (a full key path, "ports[1].mtu") in the file, or 0.
func (f *File) Line(key string) int {
	if f.doc == nil {
		return 0
	}
	return f.doc.ix.line(key)
}
