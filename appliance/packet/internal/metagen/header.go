package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// model is what the Go source marks for C.
type model struct {
	fset  *token.FileSet
	pkg   *types.Package
	info  *types.Info
	files []*ast.File

	cstruct string       // the struct's C name
	meta    *types.Named // its Go type
	fields  []cfield
	members map[string]string // Go field path ("own.state") → C member

	consts     []cconst
	constNames map[*types.Const]string
	funcs      []*cfunc
	funcNames  map[*types.Func]string
	comments   map[token.Pos]string // struct field name → its comment
	usesBool   bool
}

type cfield struct {
	goPath    string // "InPort", "own.state"; "_" for padding
	cname     string
	ctype     string
	array     int64 // elements, for an array; else 0
	off, size int64
	comment   string
}

type cconst struct {
	obj   *types.Const
	decl  *ast.GenDecl
	cname string
	value string
}

type cfunc struct {
	decl  *ast.FuncDecl
	obj   *types.Func
	cname string
	doc   string // C comment lines
	sig   string // the C declaration
	body  string // the C definition, after sig
}

// directive is the argument list of a //metagen:c line in doc, or nil.
func directive(doc *ast.CommentGroup) []string {
	if doc == nil {
		return nil
	}
	for _, c := range doc.List {
		if rest, ok := strings.CutPrefix(c.Text, "//metagen:c"); ok && (rest == "" || rest[0] == ' ') {
			return append([]string{}, strings.Fields(rest)...)
		}
	}
	return nil
}

// Generate writes the header for the Go package in dir.
func Generate(dir string) ([]byte, error) {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return generate(fset, files)
}

// layoutArches are the architectures whose layout the header states: gc's
// 64-bit ones, which agree (Generate checks it).
var layoutArches = []string{"amd64", "arm64"}

func generate(fset *token.FileSet, files []*ast.File) ([]byte, error) {
	m := &model{
		fset: fset, files: files,
		info: &types.Info{
			Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{},
			Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{},
		},
		members: map[string]string{}, constNames: map[*types.Const]string{},
		funcNames: map[*types.Func]string{}, comments: map[token.Pos]string{},
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Sizes: types.SizesFor("gc", layoutArches[0])}
	var err error
	if m.pkg, err = conf.Check(files[0].Name.Name, fset, files, m.info); err != nil {
		return nil, err
	}
	if err := m.collect(); err != nil {
		return nil, err
	}
	return m.emit()
}

func (m *model) errorf(pos token.Pos, format string, args ...any) error {
	return fmt.Errorf("%s: %s", m.fset.Position(pos), fmt.Sprintf(format, args...))
}

// collect finds what the directives mark, in source order.
func (m *model) collect() error {
	var structSpec *ast.TypeSpec
	for _, f := range m.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if st, ok := s.Type.(*ast.StructType); ok {
							m.fieldComments(st)
						}
						args := directive(s.Doc)
						if args == nil && len(d.Specs) == 1 {
							args = directive(d.Doc)
						}
						if args == nil {
							continue
						}
						if len(args) != 1 || m.meta != nil {
							return m.errorf(s.Pos(), "want one //metagen:c NAME struct, with its C name")
						}
						m.cstruct, structSpec = args[0], s
						m.meta, _ = m.info.Defs[s.Name].Type().(*types.Named)
					case *ast.ValueSpec:
						args := directive(s.Doc)
						if args == nil {
							args = directive(d.Doc)
						}
						if args == nil {
							continue
						}
						if len(args) != 0 || d.Tok != token.CONST {
							return m.errorf(s.Pos(), "//metagen:c takes no argument on constants, and marks only constants")
						}
						if err := m.constant(d, s); err != nil {
							return err
						}
					}
				}
			case *ast.FuncDecl:
				args := directive(d.Doc)
				if args == nil {
					continue
				}
				if len(args) != 1 {
					return m.errorf(d.Pos(), "want //metagen:c NAME on a function, with its C name")
				}
				fn := &cfunc{decl: d, obj: m.info.Defs[d.Name].(*types.Func), cname: args[0]}
				m.funcs = append(m.funcs, fn)
				m.funcNames[fn.obj] = fn.cname
			}
		}
	}
	if m.meta == nil {
		return fmt.Errorf("no struct is marked //metagen:c NAME")
	}
	st, ok := m.meta.Underlying().(*types.Struct)
	if !ok {
		return m.errorf(structSpec.Pos(), "%s is not a struct", m.meta.Obj().Name())
	}
	var layouts [][]cfield
	for _, arch := range layoutArches {
		var fs []cfield
		pad := 0
		if err := m.layout(st, types.SizesFor("gc", arch), "", "", 0, &fs, &pad); err != nil {
			return err
		}
		layouts = append(layouts, fs)
	}
	for _, l := range layouts[1:] {
		if fmt.Sprint(l) != fmt.Sprint(layouts[0]) {
			return m.errorf(structSpec.Pos(), "%s has another layout on %s than on %s", m.meta.Obj().Name(), layoutArches[1], layoutArches[0])
		}
	}
	m.fields = layouts[0]
	size := types.SizesFor("gc", layoutArches[0]).Sizeof(st)
	end := int64(0)
	for _, f := range m.fields {
		if f.off != end {
			return m.errorf(structSpec.Pos(), "%s has %d bytes of implicit padding before %s: declare them as a _ field, so that C has them too",
				m.meta.Obj().Name(), f.off-end, f.goPath)
		}
		end = f.off + f.size
		m.members[f.goPath] = f.cname
	}
	if end != size {
		return m.errorf(structSpec.Pos(), "%s has %d bytes of implicit padding at its end: declare them as a _ field", m.meta.Obj().Name(), size-end)
	}
	return nil
}

func (m *model) fieldComments(st *ast.StructType) {
	for _, f := range st.Fields.List {
		cg := f.Comment
		if cg == nil {
			cg = f.Doc
		}
		if cg == nil {
			continue
		}
		text := strings.Join(strings.Fields(cg.Text()), " ")
		for _, n := range f.Names {
			m.comments[n.Pos()] = text
		}
	}
}

// layout flattens st's fields, at base, into out.
func (m *model) layout(st *types.Struct, sizes types.Sizes, goPrefix, cPrefix string, base int64, out *[]cfield, pad *int) error {
	vars := make([]*types.Var, st.NumFields())
	for i := range vars {
		vars[i] = st.Field(i)
	}
	offs := sizes.Offsetsof(vars)
	for i, v := range vars {
		f := cfield{goPath: goPrefix + v.Name(), cname: cPrefix + snake(v.Name()), off: base + offs[i], size: sizes.Sizeof(v.Type()),
			comment: m.comments[v.Pos()]}
		if v.Name() == "_" {
			f.goPath, f.cname = "_", fmt.Sprintf("pad%d", *pad)
			*pad++
		}
		t := v.Type().Underlying()
		if a, ok := t.(*types.Array); ok {
			f.array, t = a.Len(), a.Elem().Underlying()
		}
		switch t := t.(type) {
		case *types.Basic:
			c, ok := cBasic(t)
			if !ok {
				return m.errorf(v.Pos(), "field %s is a %s, which C does not mirror", f.goPath, v.Type())
			}
			f.ctype = c
			if c == "bool" {
				m.usesBool = true
			}
			*out = append(*out, f)
		case *types.Struct:
			if f.array != 0 || v.Name() == "_" {
				return m.errorf(v.Pos(), "field %s: only a named, single struct is flattened", f.goPath)
			}
			if err := m.layout(t, sizes, f.goPath+".", f.cname+"_", f.off, out, pad); err != nil {
				return err
			}
		default:
			return m.errorf(v.Pos(), "field %s is a %s, which C does not mirror", f.goPath, v.Type())
		}
	}
	return nil
}

// constant records the exported constants of s.
func (m *model) constant(d *ast.GenDecl, s *ast.ValueSpec) error {
	// Flags (declared with a shift) read best in hex.
	hex := false
	if vs, ok := d.Specs[0].(*ast.ValueSpec); ok && len(vs.Values) > 0 {
		ast.Inspect(vs.Values[0], func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.SHL {
				hex = true
			}
			return true
		})
	}
	for i, n := range s.Names {
		if !n.IsExported() {
			continue
		}
		c := m.info.Defs[n].(*types.Const)
		if c.Val().Kind() != constant.Int {
			return m.errorf(n.Pos(), "constant %s is not an integer", n.Name)
		}
		name := n.Name
		if t, ok := c.Type().(*types.Named); ok && !strings.HasPrefix(name, t.Obj().Name()) {
			name = t.Obj().Name() + name
		}
		cc := cconst{obj: c, decl: d, cname: "LR_" + strings.ToUpper(snake(name)), value: c.Val().ExactString()}
		if i < len(s.Values) && cLiteral(s.Values[i]) {
			cc.value = s.Values[i].(*ast.BasicLit).Value
		} else if u, ok := constant.Uint64Val(c.Val()); ok && hex {
			cc.value = fmt.Sprintf("0x%02X", u)
		}
		for _, o := range m.consts {
			if o.cname == cc.cname {
				return m.errorf(n.Pos(), "%s and %s are both %s in C", o.obj.Name(), n.Name, cc.cname)
			}
		}
		m.consts = append(m.consts, cc)
		m.constNames[c] = cc.cname
	}
	return nil
}

// cLiteral reports an integer literal that C reads as Go does.
func cLiteral(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.INT || strings.Contains(l.Value, "_") {
		return false
	}
	v := strings.ToLower(l.Value)
	return !strings.HasPrefix(v, "0o") && !strings.HasPrefix(v, "0b") && (len(v) == 1 || v[0] != '0' || v[1] == 'x')
}

func cBasic(b *types.Basic) (string, bool) {
	switch b.Kind() {
	case types.Bool:
		return "bool", true
	case types.Int8:
		return "int8_t", true
	case types.Int16:
		return "int16_t", true
	case types.Int32:
		return "int32_t", true
	case types.Int64, types.Int:
		return "int64_t", true
	case types.Uint8:
		return "uint8_t", true
	case types.Uint16:
		return "uint16_t", true
	case types.Uint32:
		return "uint32_t", true
	case types.Uint64, types.Uint:
		return "uint64_t", true
	case types.Uintptr:
		return "uintptr_t", true
	}
	return "", false
}

// snake is a Go name in lower snake case: InPort → in_port, FlagHWTimestamp →
// flag_hw_timestamp.
func snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) &&
			(unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// literal is the C for integer or bool constant v of Go type t: C's literal
// types differ from Go's, so big values carry a suffix.
func literal(v constant.Value, t types.Type) (string, error) {
	if v.Kind() == constant.Bool {
		return strconv.FormatBool(constant.BoolVal(v)), nil
	}
	if v.Kind() != constant.Int {
		return "", fmt.Errorf("constant %s is not an integer", v)
	}
	b, _ := t.Underlying().(*types.Basic)
	unsigned := b != nil && b.Info()&types.IsUnsigned != 0
	if constant.Sign(v) < 0 {
		n, ok := constant.Int64Val(v)
		switch {
		case !ok || n == math.MinInt64:
			return "", fmt.Errorf("constant %s is out of C's range", v)
		case n >= math.MinInt32:
			return fmt.Sprintf("(%d)", n), nil
		}
		return fmt.Sprintf("INT64_C(%d)", n), nil
	}
	u, ok := constant.Uint64Val(v)
	if !ok {
		return "", fmt.Errorf("constant %s is out of C's range", v)
	}
	s := strconv.FormatUint(u, 10)
	if u >= 256 {
		s = fmt.Sprintf("0x%X", u)
	}
	switch {
	case u <= math.MaxInt32:
		return s, nil
	case unsigned && u <= math.MaxUint32:
		return s + "u", nil
	case unsigned:
		return "UINT64_C(" + s + ")", nil
	case u <= math.MaxInt64:
		return "INT64_C(" + s + ")", nil
	}
	return "", fmt.Errorf("constant %s is out of C's range", v)
}

func (m *model) emit() ([]byte, error) {
	for _, f := range m.funcs {
		if err := m.translate(f); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	goName := m.pkg.Name() + "." + m.meta.Obj().Name()
	p("// Code generated by metagen from package %s; DO NOT EDIT.\n\n", m.pkg.Name())
	p("// The packet metadata ABI in C: %s as struct %s, the constants\n", goName, m.cstruct)
	p("// its fields hold, and the functions C runs on it, translated from Go. The Go\n")
	p("// package is the source: `go generate ./appliance/packet` (or `make generate`)\n")
	p("// writes this file, and `make lint` fails when it is stale. Plain C, no DPDK.\n\n")
	guard := "LINERATE_" + strings.ToUpper(m.cstruct) + "_H"
	p("#ifndef %s\n#define %s\n\n", guard, guard)
	if m.usesBool {
		p("#include <stdbool.h>\n")
	}
	p("#include <stddef.h>\n#include <stdint.h>\n")
	for i, c := range m.consts {
		if i == 0 || c.decl != m.consts[i-1].decl {
			p("\n")
		}
		def := "#define " + c.cname + " " + c.value
		width := 0
		for _, o := range m.consts {
			if o.decl == c.decl {
				width = max(width, len("#define "+o.cname+" "+o.value))
			}
		}
		p("%-*s // %s.%s\n", width, def, m.pkg.Name(), c.obj.Name())
	}
	p("\n// struct %s is %s, byte for byte.\nstruct %s {\n", m.cstruct, goName, m.cstruct)
	decls := make([]string, len(m.fields))
	width := 0
	for i, f := range m.fields {
		decls[i] = f.ctype + " " + f.cname
		if f.array != 0 {
			decls[i] += fmt.Sprintf("[%d]", f.array)
		}
		decls[i] += ";"
		width = max(width, len(decls[i]))
	}
	for i, f := range m.fields {
		switch {
		case f.comment == "":
			p("\t%s\n", decls[i])
		case 8+width+4+len(f.comment) <= 100:
			p("\t%-*s // %s\n", width, decls[i], f.comment)
		default:
			// Too long to trail the field: above it, wrapped.
			for _, l := range wrap(f.comment, 100-8-3) {
				p("\t// %s\n", l)
			}
			p("\t%s\n", decls[i])
		}
	}
	p("};\n\n")
	for _, f := range m.fields {
		what := goName + "." + f.goPath
		if f.goPath == "_" {
			what = "padding of " + goName
		}
		p("_Static_assert(offsetof(struct %s, %s) == %d, \"%s\");\n", m.cstruct, f.cname, f.off, what)
	}
	size := m.fields[len(m.fields)-1].off + m.fields[len(m.fields)-1].size
	p("_Static_assert(sizeof(struct %s) == %d, \"%s\");\n", m.cstruct, size, goName)
	if len(m.funcs) > 0 {
		p("\n")
		// Declarations first: a function may call one defined after it.
		for _, f := range m.funcs {
			p("%s;\n", f.sig)
		}
		for _, f := range m.funcs {
			p("\n%s%s%s", f.doc, f.sig, f.body)
		}
	}
	p("\n#endif\n")
	return b.Bytes(), nil
}

// wrap breaks text into lines of at most width bytes, between words.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines, line = append(lines, line), ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}
