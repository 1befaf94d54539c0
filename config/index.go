package config

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// index maps every key path of a TOML document to the line where it first
// appears. BurntSushi keeps positions only per key path without array indices
// (the last element of an array of tables wins), and none at all for keys it
// reports as undecoded, so config scans the document once itself.
//
// Paths are written as in error messages: segments joined by dots, quoted when
// they are not bare keys (as toml.Key.String does), and an element of an array,
// of tables or of values, as "[i]": "pipelines[0].stages[2].delay",
// "pipelines[1].rx[0]".
type index struct {
	lines map[string]entry // path with indices → where it first appears
	plain map[string]int   // path without indices (toml.Key.String) → first line
	// arrays counts the elements of each array of tables seen so far, by path.
	arrays map[string]int
}

type entry struct {
	line  int
	plain string
}

// ipath is a key path under construction, with and without array indices.
type ipath struct{ idx, plain string }

func (p ipath) key(name string) ipath {
	q := quoteKey(name)
	if p.idx == "" {
		return ipath{q, q}
	}
	return ipath{p.idx + "." + q, p.plain + "." + q}
}

func (p ipath) elem(i int) ipath { return ipath{p.idx + "[" + strconv.Itoa(i) + "]", p.plain} }

// quoteKey writes one key segment as TOML would: bare when it can be.
func quoteKey(name string) string { return toml.Key{name}.String() }

// joinKey appends a key segment to a path.
func joinKey(path, name string) string {
	if path == "" {
		return quoteKey(name)
	}
	return path + "." + quoteKey(name)
}

// line is the line of path, or of its nearest ancestor that has one (a key the
// file leaves out is reported at its table). 0 when nothing matches.
func (ix *index) line(path string) int {
	if ix == nil {
		return 0
	}
	for path != "" {
		if e, ok := ix.lines[path]; ok {
			return e.line
		}
		path = parentPath(path)
	}
	return 0
}

func (ix *index) has(path string) bool {
	if ix == nil {
		return false
	}
	_, ok := ix.lines[path]
	return ok
}

// resolve finds the indexed path for a BurntSushi key (which has no indices): the
// one with that plain path appearing last at or before line. It returns plain
// itself when there is none.
func (ix *index) resolve(plain string, line int) string {
	best, bestLine := plain, -1
	for p, e := range ix.lines {
		if e.plain == plain && e.line <= line && (e.line > bestLine || e.line == bestLine && p > best) {
			best, bestLine = p, e.line
		}
	}
	return best
}

// parentPath drops the last segment or index of a path: "a.b[2]" → "a.b",
// "a.b" → "a", "a" → "".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
		return ""
	}
	// The last segment may be quoted and contain dots; walk back over it.
	if strings.HasSuffix(p, `"`) {
		for i := len(p) - 2; i >= 0; i-- {
			if p[i] == '"' && (i == 0 || p[i-1] == '.') && !escaped(p, i) {
				if i == 0 {
					return ""
				}
				return p[:i-1]
			}
		}
		return ""
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// escaped reports whether p[i] is preceded by an odd number of backslashes.
func escaped(p string, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && p[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// maxDepth bounds the nesting of arrays and inline tables the scanner follows;
// deeper values are skipped without recording their keys, so hostile input
// cannot exhaust the stack.
const maxDepth = 1000

// buildIndex scans data. It never fails: on a document BurntSushi rejects it
// records what it can, and Parse reports BurntSushi's error anyway.
func buildIndex(data []byte) *index {
	ix := &index{lines: map[string]entry{}, plain: map[string]int{}, arrays: map[string]int{}}
	s := scanner{s: data, line: 1, ix: ix}
	s.run()
	return ix
}

type scanner struct {
	s    []byte
	i    int
	line int
	ix   *index
}

func (s *scanner) record(p ipath, line int) {
	if _, ok := s.ix.lines[p.idx]; !ok {
		s.ix.lines[p.idx] = entry{line, p.plain}
	}
	if _, ok := s.ix.plain[p.plain]; !ok {
		s.ix.plain[p.plain] = line
	}
}

func (s *scanner) eof() bool { return s.i >= len(s.s) }

func (s *scanner) peek() byte {
	if s.i < len(s.s) {
		return s.s[s.i]
	}
	return 0
}

func (s *scanner) hasPrefix(p string) bool {
	return len(s.s)-s.i >= len(p) && string(s.s[s.i:s.i+len(p)]) == p
}

// adv moves over one byte, counting lines.
func (s *scanner) adv() {
	if s.s[s.i] == '\n' {
		s.line++
	}
	s.i++
}

func (s *scanner) skipBlank() {
	for !s.eof() && (s.s[s.i] == ' ' || s.s[s.i] == '\t') {
		s.i++
	}
}

// skipLine moves to the next newline, leaving it unread.
func (s *scanner) skipLine() {
	for !s.eof() && s.s[s.i] != '\n' {
		s.i++
	}
}

func (s *scanner) run() {
	// BurntSushi drops these byte order marks before lexing.
	for _, bom := range []string{"\xff\xfe", "\xfe\xff", "\xef\xbb\xbf"} {
		if s.hasPrefix(bom) {
			s.i = len(bom)
			break
		}
	}
	var table ipath
	for !s.eof() {
		switch s.s[s.i] {
		case ' ', '\t', '\r':
			s.i++
		case '\n':
			s.adv()
		case '#':
			s.skipLine()
		case '[':
			table = s.header()
			s.skipLine()
		default:
			start := s.i
			s.keyValue(table, 0)
			if s.i == start {
				s.i++
			}
			s.skipLine()
		}
	}
}

// header reads "[a.b]" or "[[a.b]]" and returns the table's path. Earlier
// segments naming an array of tables refer to its last element, as in TOML.
func (s *scanner) header() ipath {
	line := s.line
	s.i++
	array := false
	if s.peek() == '[' {
		array = true
		s.i++
	}
	segs := s.key()
	var p ipath
	for j, seg := range segs {
		p = p.key(seg)
		switch n, seen := s.ix.arrays[p.idx]; {
		case array && j == len(segs)-1:
			s.ix.arrays[p.idx] = n + 1
			s.record(p, line)
			p = p.elem(n)
		case seen && n > 0:
			p = p.elem(n - 1)
		}
		s.record(p, line)
	}
	return p
}

// key reads a dotted key and returns its segments; none when there is no key.
func (s *scanner) key() []string {
	var segs []string
	for {
		s.skipBlank()
		if s.eof() {
			return segs
		}
		var name string
		switch s.s[s.i] {
		case '"':
			name = s.basicString()
		case '\'':
			name = s.literalString()
		default:
			start := s.i
			for !s.eof() && !keyDelim(s.s[s.i]) {
				s.i++
			}
			if s.i == start {
				return segs
			}
			name = string(s.s[start:s.i])
		}
		segs = append(segs, name)
		s.skipBlank()
		if s.peek() != '.' {
			return segs
		}
		s.i++
	}
}

func keyDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '=', '.', '[', ']', '{', '}', ',', '#', '"', '\'':
		return true
	}
	return false
}

// keyValue reads "a.b = value" in table, recording every prefix of the key.
func (s *scanner) keyValue(table ipath, depth int) {
	line := s.line
	segs := s.key()
	if len(segs) == 0 || s.peek() != '=' {
		return
	}
	s.i++
	p := table
	for _, seg := range segs {
		p = p.key(seg)
		s.record(p, line)
	}
	s.skipBlank()
	s.value(p, depth)
}

func (s *scanner) value(p ipath, depth int) {
	if s.eof() {
		return
	}
	switch {
	case s.hasPrefix(`"""`):
		s.multiline('"')
	case s.hasPrefix(`'''`):
		s.multiline('\'')
	case s.s[s.i] == '"':
		s.basicString()
	case s.s[s.i] == '\'':
		s.literalString()
	case s.s[s.i] == '[':
		s.array(p, depth+1)
	case s.s[s.i] == '{':
		s.inlineTable(p, depth+1)
	default:
		s.scalar()
	}
}

func (s *scanner) array(p ipath, depth int) {
	if depth > maxDepth {
		s.skipNested()
		return
	}
	s.i++
	for n := 0; !s.eof(); {
		switch s.s[s.i] {
		case ' ', '\t', '\r', ',':
			s.i++
		case '\n':
			s.adv()
		case '#':
			s.skipLine()
		case ']':
			s.i++
			return
		default:
			e := p.elem(n)
			n++
			s.record(e, s.line)
			start := s.i
			s.value(e, depth)
			if s.i == start {
				s.i++
			}
		}
	}
}

// inlineTable reads "{ k = v, … }", which TOML 1.1 (and BurntSushi 1.6) lets span
// lines and carry comments.
func (s *scanner) inlineTable(p ipath, depth int) {
	if depth > maxDepth {
		s.skipNested()
		return
	}
	s.i++
	for !s.eof() {
		switch s.s[s.i] {
		case ' ', '\t', '\r', ',':
			s.i++
		case '\n':
			s.adv()
		case '#':
			s.skipLine()
		case '}':
			s.i++
			return
		default:
			start := s.i
			s.keyValue(p, depth)
			if s.i == start {
				s.i++
			}
		}
	}
}

// skipNested moves over a too-deep array or inline table without recording it,
// still reading strings and comments so brackets inside them do not count.
func (s *scanner) skipNested() {
	level := 0
	for !s.eof() {
		switch c := s.s[s.i]; {
		case s.hasPrefix(`"""`):
			s.multiline('"')
		case s.hasPrefix(`'''`):
			s.multiline('\'')
		case c == '"':
			s.basicString()
		case c == '\'':
			s.literalString()
		case c == '#':
			s.skipLine()
		case c == '[' || c == '{':
			level++
			s.i++
		case c == ']' || c == '}':
			level--
			s.i++
			if level <= 0 {
				return
			}
		default:
			s.adv()
		}
	}
}

// scalar moves over a number, boolean or date-time. A space separates a date from
// its time ("1979-05-27 07:32:00"), so it is kept when a digit follows.
func (s *scanner) scalar() {
	start := s.i
	for !s.eof() {
		c := s.s[s.i]
		if c == ' ' && s.i+1 < len(s.s) && isDigit(s.s[s.i+1]) && looksLikeDate(s.s[start:s.i]) {
			s.i++
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n', ',', ']', '}', '#':
			return
		}
		s.i++
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func looksLikeDate(v []byte) bool {
	return len(v) > 0 && isDigit(v[0]) && strings.IndexByte(string(v), '-') > 0 &&
		!strings.ContainsAny(string(v), " Tt")
}

// basicString reads "…" and returns its unescaped value (needed for quoted keys).
// It stops before a newline: basic strings cannot span lines.
func (s *scanner) basicString() string {
	s.i++
	var b strings.Builder
	for !s.eof() {
		c := s.s[s.i]
		switch c {
		case '"':
			s.i++
			return b.String()
		case '\n':
			return b.String()
		case '\\':
			s.i++
			s.escape(&b)
		default:
			b.WriteByte(c)
			s.i++
		}
	}
	return b.String()
}

// escape decodes the escape after a backslash, as TOML 1.1 defines them.
func (s *scanner) escape(b *strings.Builder) {
	if s.eof() || s.s[s.i] == '\n' {
		return
	}
	c := s.s[s.i]
	s.i++
	hex := 0
	switch c {
	case 'b':
		b.WriteByte('\b')
	case 't':
		b.WriteByte('\t')
	case 'n':
		b.WriteByte('\n')
	case 'f':
		b.WriteByte('\f')
	case 'r':
		b.WriteByte('\r')
	case 'e':
		b.WriteByte(0x1b)
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	default: // '"', '\\' and anything invalid, which BurntSushi rejects
		b.WriteByte(c)
	}
	if hex == 0 {
		return
	}
	if len(s.s)-s.i < hex {
		s.i = len(s.s)
		return
	}
	v, err := strconv.ParseUint(string(s.s[s.i:s.i+hex]), 16, 32)
	s.i += hex
	if err == nil && utf8.ValidRune(rune(v)) {
		b.WriteRune(rune(v))
	}
}

// literalString reads '…'; no escapes, no newlines.
func (s *scanner) literalString() string {
	s.i++
	start := s.i
	for !s.eof() {
		switch s.s[s.i] {
		case '\'':
			v := string(s.s[start:s.i])
			s.i++
			return v
		case '\n':
			return string(s.s[start:s.i])
		}
		s.i++
	}
	return string(s.s[start:])
}

// multiline moves over """…""" or ”'…”'. Up to two extra quotes before the
// closing three belong to the value, as in BurntSushi's lexer.
func (s *scanner) multiline(q byte) {
	s.i += 3
	close := string([]byte{q, q, q})
	for !s.eof() {
		c := s.s[s.i]
		switch {
		case c == '\\' && q == '"':
			s.i++
			if !s.eof() {
				s.adv()
			}
		case c == q && s.hasPrefix(close):
			if s.i+3 < len(s.s) && s.s[s.i+3] == q {
				s.i++
				continue
			}
			s.i += 3
			return
		default:
			s.adv()
		}
	}
}
