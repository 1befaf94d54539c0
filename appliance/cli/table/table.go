// Package table lays out the tables the linerate CLI prints, so that each
// fits Width columns however long its cells are:
//
//   - a table that fits prints one line per row;
//   - otherwise the cells of Wrap columns break across lines within their
//     column, after a space, a comma or a slash;
//   - a Detail column that would be squeezed leaves the table for a detail
//     view below it: one block per row, under the row's key;
//   - a table that fits no other way prints one block per row, a line per
//     column.
//
// Options.Wide prints one line per row whatever the width, for wide terminals
// and for tools that read lines. docs/contributing.md has the rules for a
// command's output.
package table

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Width is the width a table fits by default, in columns.
const Width = 100

const (
	gap       = 2  // spaces between columns
	detailMin = 24 // a Detail column narrower than this goes to the detail view
)

// Column is a table's column.
type Column struct {
	Name string
	// Right aligns the column to the right: numbers.
	Right bool
	// Wrap lets a cell break across lines after a space, a comma or a slash:
	// lists, paths, descriptions.
	Wrap bool
	// Detail moves the column to the detail view below the table when the
	// table is too wide for it: long lists such as counters.
	Detail bool
}

// Cols makes left-aligned columns of the names.
func Cols(names ...string) []Column {
	cs := make([]Column, len(names))
	for i, n := range names {
		cs[i].Name = n
	}
	return cs
}

// Table is a table to print: its columns, then its rows of cells.
type Table struct {
	Columns []Column
	Rows    [][]string
	// Indent is the number of spaces before every line.
	Indent int
	// Key is how many leading columns name a row, joined by "/", in the
	// detail view and in blocks; 0 means 1.
	Key int
}

// New makes a table of the columns. With no column names at all it prints
// no header line: a list of "name value" lines.
func New(cols ...Column) *Table { return &Table{Columns: cols} }

// Add appends a row; a row with fewer cells than columns ends in empty ones.
func (t *Table) Add(cells ...string) {
	if len(cells) > len(t.Columns) {
		panic("table: a row with more cells than columns")
	}
	row := make([]string, len(t.Columns))
	copy(row, cells)
	t.Rows = append(t.Rows, row)
}

// Options say how to lay a table out.
type Options struct {
	Width int  // columns to fit; 0 is Width
	Wide  bool // one line per row, whatever the width
}

func (o Options) width() int {
	if o.Width <= 0 {
		return Width
	}
	return o.Width
}

// Write prints the table.
func (t *Table) Write(w io.Writer, o Options) error {
	var b strings.Builder
	t.render(&b, o)
	_, err := io.WriteString(w, b.String())
	return err
}

// String is the table laid out with the default options.
func (t *Table) String() string {
	var b strings.Builder
	t.render(&b, Options{})
	return b.String()
}

func (t *Table) render(b *strings.Builder, o Options) {
	all := make([]int, len(t.Columns))
	for i := range all {
		all[i] = i
	}
	if o.Wide {
		t.lines(b, all, t.natural(), false)
		return
	}
	width := o.width()
	// Detail columns wrap in place only when that leaves them some room.
	if ws, ok := t.fit(all, width, true); ok {
		t.lines(b, all, ws, true)
		return
	}
	var kept, moved []int
	for _, i := range all {
		if t.Columns[i].Detail {
			moved = append(moved, i)
		} else {
			kept = append(kept, i)
		}
	}
	if len(moved) > 0 {
		if ws, ok := t.fit(kept, width, false); ok {
			t.lines(b, kept, ws, true)
			t.details(b, moved, width)
			return
		}
	}
	t.blocks(b, width)
}

// natural is each column's width on one line.
func (t *Table) natural() []int {
	ws := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		ws[i] = textWidth(c.Name)
	}
	for _, r := range t.Rows {
		for i, cell := range r {
			ws[i] = max(ws[i], textWidth(cell))
		}
	}
	return ws
}

// fit gives the columns cols widths that fit width, wrapping Wrap columns as
// little as it can: each gets at least its longest word and its name, and
// then, in turn, a column more where it needs the most. ok is false when
// they do not fit even so. With roomy, a Detail column gets at least
// detailMin or does not fit.
func (t *Table) fit(cols []int, width int, roomy bool) (ws []int, ok bool) {
	nat := t.natural()
	ws = make([]int, len(t.Columns))
	avail := width - t.Indent - gap*(len(cols)-1)
	var wrap []int
	for _, i := range cols {
		c := t.Columns[i]
		if !c.Wrap {
			ws[i] = nat[i]
			avail -= nat[i]
			continue
		}
		least := textWidth(c.Name)
		for _, r := range t.Rows {
			for _, word := range words(r[i]) {
				least = max(least, textWidth(strings.TrimRight(word, " ")))
			}
		}
		if roomy && c.Detail {
			least = max(least, min(nat[i], detailMin))
		}
		ws[i] = least
		avail -= least
		wrap = append(wrap, i)
	}
	if avail < 0 {
		return nil, false
	}
	for ; avail > 0; avail-- {
		most := -1
		for _, i := range wrap {
			if ws[i] < nat[i] && (most < 0 || nat[i]-ws[i] > nat[most]-ws[most]) {
				most = i
			}
		}
		if most < 0 {
			break
		}
		ws[most]++
	}
	return ws, true
}

// lines prints the header and the rows, a cell of a Wrap column on as many
// lines as it needs when wrap is set.
func (t *Table) lines(b *strings.Builder, cols []int, ws []int, wrap bool) {
	indent := strings.Repeat(" ", t.Indent)
	header := false
	for _, i := range cols {
		header = header || t.Columns[i].Name != ""
	}
	line := make([]string, len(t.Columns))
	put := func() {
		var l strings.Builder
		l.WriteString(indent)
		for k, i := range cols {
			if k > 0 {
				l.WriteString(strings.Repeat(" ", gap))
			}
			pad := strings.Repeat(" ", max(ws[i]-textWidth(line[i]), 0))
			if t.Columns[i].Right {
				l.WriteString(pad + line[i])
			} else {
				l.WriteString(line[i] + pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	if header {
		for _, i := range cols {
			line[i] = t.Columns[i].Name
		}
		put()
	}
	cells := make([][]string, len(t.Columns))
	for _, r := range t.Rows {
		height := 1
		for _, i := range cols {
			cells[i] = []string{r[i]}
			if wrap && t.Columns[i].Wrap {
				cells[i] = fill(r[i], ws[i])
			}
			height = max(height, len(cells[i]))
		}
		for k := 0; k < height; k++ {
			for _, i := range cols {
				line[i] = ""
				if k < len(cells[i]) {
					line[i] = cells[i][k]
				}
			}
			put()
		}
	}
}

// details prints the cells of the columns moved out of the table, after a
// blank line: for each row with something to say, its key, then a line per
// column, wrapped.
func (t *Table) details(b *strings.Builder, moved []int, width int) {
	indent := strings.Repeat(" ", t.Indent+2)
	label := 0
	for _, i := range moved {
		label = max(label, textWidth(t.Columns[i].Name))
	}
	first := true
	for _, r := range t.Rows {
		var body strings.Builder
		for _, i := range moved {
			if r[i] != "" && r[i] != "-" {
				labelled(&body, indent, label, strings.ToLower(t.Columns[i].Name), r[i], width)
			}
		}
		if body.Len() == 0 {
			continue
		}
		if first {
			b.WriteByte('\n')
			first = false
		}
		for _, l := range fill(t.key(r), width-t.Indent) {
			b.WriteString(strings.Repeat(" ", t.Indent) + l + "\n")
		}
		b.WriteString(body.String())
	}
}

// blocks prints each row as a block of "NAME  value" lines: the layout of a
// table whose columns do not fit side by side.
func (t *Table) blocks(b *strings.Builder, width int) {
	indent := strings.Repeat(" ", t.Indent)
	label := 0
	for _, c := range t.Columns {
		label = max(label, textWidth(c.Name))
	}
	for n, r := range t.Rows {
		if n > 0 {
			b.WriteByte('\n')
		}
		for i, c := range t.Columns {
			labelled(b, indent, label, c.Name, r[i], width)
		}
	}
}

// labelled prints "name  value", the value wrapped beside names label
// columns wide; when that leaves the value too little room, the value goes
// on the lines below the name, indented.
func labelled(b *strings.Builder, indent string, label int, name, value string, width int) {
	room := width - len(indent) - label - gap
	if room < 10 {
		b.WriteString(strings.TrimRight(indent+name, " ") + "\n")
		for _, l := range fill(value, width-len(indent)-gap) {
			b.WriteString(strings.TrimRight(indent+"  "+l, " ") + "\n")
		}
		return
	}
	for k, l := range fill(value, room) {
		if k > 0 {
			name = ""
		}
		b.WriteString(strings.TrimRight(indent+name+strings.Repeat(" ", label-textWidth(name)+gap)+l, " ") + "\n")
	}
}

func (t *Table) key(r []string) string {
	n := max(t.Key, 1)
	return strings.Join(r[:min(n, len(r))], "/")
}

// Text prints text wrapped to the width at spaces, commas and slashes, its
// first line indented by indent spaces and the others by two more; with
// Wide, on one line.
func Text(w io.Writer, o Options, indent int, text string) error {
	if o.Wide {
		_, err := io.WriteString(w, strings.Repeat(" ", indent)+text+"\n")
		return err
	}
	var b strings.Builder
	for k, l := range hang(text, max(o.width()-indent, detailMin), max(o.width()-indent-2, detailMin)) {
		pad := indent
		if k > 0 {
			pad += 2
		}
		b.WriteString(strings.Repeat(" ", pad) + l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// words splits s after each space, comma and slash: where a line may break.
// A word keeps its trailing separator.
func words(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if r == ' ' || r == ',' || r == '/' {
			out = append(out, s[start:i+1])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// fill breaks s into lines of at most width columns, at word ends; a word
// longer than a line is cut. The spaces at a break are dropped; those that
// begin s stay (an indented row).
func fill(s string, width int) []string { return hang(s, width, width) }

// hang is fill with a first line of its own width.
func hang(s string, first, rest int) []string {
	width := max(first, 1)
	var lines []string
	var cur strings.Builder
	n := 0 // width of cur
	flush := func() {
		lines = append(lines, strings.TrimRight(cur.String(), " "))
		cur.Reset()
		n = 0
		width = max(rest, 1)
	}
	for _, word := range words(s) {
		ww := textWidth(word)
		// The word's trailing space may hang past the edge.
		bare := textWidth(strings.TrimRight(word, " "))
		if n > 0 && n+bare > width {
			flush()
		}
		if n == 0 && len(lines) > 0 {
			word = strings.TrimLeft(word, " ")
			ww = textWidth(word)
			bare = textWidth(strings.TrimRight(word, " "))
		}
		for bare > width {
			head, tail := cut(word, width)
			cur.WriteString(head)
			flush()
			word = tail
			ww = textWidth(word)
			bare = textWidth(strings.TrimRight(word, " "))
		}
		cur.WriteString(word)
		n += ww
	}
	if n > 0 || len(lines) == 0 {
		flush()
	}
	return lines
}

// cut splits s after n runes.
func cut(s string, n int) (string, string) {
	i := 0
	for k := range s {
		if i == n {
			return s[:k], s[k:]
		}
		i++
	}
	return s, ""
}

// textWidth is the columns s takes: one per rune, as for the text linerate
// prints (ASCII, µ, →).
func textWidth(s string) int { return utf8.RuneCountInString(s) }
