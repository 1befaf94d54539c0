package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Error is one problem in a config file: a syntax error, an unknown key, a value
// of the wrong type or an impossible value.
type Error struct {
	File string // file name as given to Parse or Load
	Line int    // 1-based; 0 when the problem has no line (a missing key)
	Key  string // full key path, e.g. "pipelines[0].stages[2].delay"; may be empty
	Err  error
}

// Error formats e as "file:line: key: message", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem found in one pass, sorted by line. Parse, Validate and
// Table.Decode return it (as error) when there is at least one.
type Errors []*Error

// Error joins the errors, one per line.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap gives the errors to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Err sorts es by line (keeping the order of errors on one line) and returns
// it, or nil when it is empty: what a check returns.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	slices.SortStableFunc(es, func(a, b *Error) int { return a.Line - b.Line })
	return es
}

// syntaxError turns a BurntSushi parse failure into an Error. Its line comes from
// the lexer and is exact; its key has no array indices, so the index supplies
// them where it can.
func syntaxError(name string, data []byte, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return Errors{{File: name, Err: err}}
	}
	key := pe.LastKey
	if key != "" {
		key = buildIndex(data).resolve(key, pe.Position.Line)
	}
	return Errors{{File: name, Line: pe.Position.Line, Key: key, Err: errors.New(pe.Message)}}
}
