package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"strings"
)

// translator writes one function's C. It keeps the first error and goes on
// writing, so that the code stays linear.
type translator struct {
	m   *model
	fn  *cfunc
	b   strings.Builder
	ind int
	err error
}

func (t *translator) fail(n ast.Node, format string, args ...any) {
	if t.err == nil {
		t.err = t.m.errorf(n.Pos(), "%s: %s", t.fn.decl.Name.Name, fmt.Sprintf(format, args...))
	}
}

func (t *translator) line(format string, args ...any) {
	t.b.WriteString(strings.Repeat("\t", t.ind))
	fmt.Fprintf(&t.b, format, args...)
	t.b.WriteByte('\n')
}

// translate fills in f's C.
func (m *model) translate(f *cfunc) error {
	t := &translator{m: m, fn: f}
	f.sig = t.signature()
	t.line("{")
	t.block(f.decl.Body.List)
	t.line("}")
	f.body = "\n" + t.b.String()
	name := m.pkg.Name() + "." + f.obj.Name()
	if r := f.obj.Type().(*types.Signature).Recv(); r != nil {
		qual := func(p *types.Package) string { return p.Name() }
		name = fmt.Sprintf("(%s).%s", types.TypeString(r.Type(), qual), f.obj.Name())
	}
	f.doc = fmt.Sprintf("// %s is %s, translated.\n", f.cname, name)
	if d := f.decl.Doc; d != nil {
		for _, l := range strings.Split(strings.TrimSpace(d.Text()), "\n") {
			f.doc += strings.TrimRight("// "+l, " ") + "\n"
		}
	}
	return t.err
}

// ctype is the C type of a local, parameter or result of Go type typ.
func (t *translator) ctype(n ast.Node, typ types.Type) string {
	switch u := typ.Underlying().(type) {
	case *types.Basic:
		if c, ok := cBasic(u); ok {
			if c == "bool" {
				t.m.usesBool = true
			}
			return c
		}
	case *types.Pointer:
		if types.Identical(u.Elem(), t.m.meta) {
			return "struct " + t.m.cstruct + " *"
		}
	case *types.Slice:
		if b, ok := u.Elem().(*types.Basic); ok && b.Kind() == types.Uint8 {
			return "uint8_t *"
		}
	}
	t.fail(n, "C has no type for %s", typ)
	return "void"
}

func (t *translator) decl(n ast.Node, typ types.Type, name string) string {
	c := t.ctype(n, typ)
	t.name(n, name)
	if strings.HasSuffix(c, "*") {
		return c + name
	}
	return c + " " + name
}

var cKeywords = map[string]bool{
	"auto": true, "char": true, "const": true, "double": true, "enum": true, "extern": true, "float": true,
	"inline": true, "int": true, "long": true, "register": true, "restrict": true, "short": true, "signed": true,
	"sizeof": true, "static": true, "typedef": true, "union": true, "unsigned": true, "void": true,
	"volatile": true, "while": true, "do": true, "bool": true, "true": true, "false": true,
}

func (t *translator) name(n ast.Node, name string) {
	if name == "" || name == "_" || cKeywords[name] || strings.HasPrefix(name, "LR_") {
		t.fail(n, "%q cannot be a name in C", name)
	}
}

func (t *translator) signature() string {
	d, sig := t.fn.decl, t.fn.obj.Type().(*types.Signature)
	var params []string
	if r := sig.Recv(); r != nil {
		params = append(params, t.decl(d.Recv, r.Type(), r.Name()))
	}
	for i := range sig.Params().Len() {
		v := sig.Params().At(i)
		params = append(params, t.decl(d.Type.Params, v.Type(), v.Name()))
	}
	if len(params) == 0 {
		params = []string{"void"}
	}
	ret := "void"
	switch res := sig.Results(); {
	case res.Len() > 1 || res.Len() == 1 && res.At(0).Name() != "":
		t.fail(d.Type.Results, "C takes one unnamed result at most")
	case res.Len() == 1:
		ret = t.ctype(d.Type.Results, res.At(0).Type())
	}
	return fmt.Sprintf("static inline %s %s(%s)", ret, t.fn.cname, strings.Join(params, ", "))
}

func (t *translator) block(list []ast.Stmt) {
	t.ind++
	for _, s := range list {
		t.stmt(s)
	}
	t.ind--
}

func (t *translator) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.AssignStmt:
		t.assign(s)
	case *ast.IncDecStmt:
		t.line("%s%s;", t.expr(s.X), s.Tok)
	case *ast.ReturnStmt:
		switch len(s.Results) {
		case 0:
			t.line("return;")
		case 1:
			t.line("return %s;", t.expr(s.Results[0]))
		default:
			t.fail(s, "C returns one value at most")
		}
	case *ast.ExprStmt:
		if _, ok := ast.Unparen(s.X).(*ast.CallExpr); !ok {
			t.fail(s, "an expression statement that is not a call")
		}
		t.line("%s;", t.expr(s.X))
	case *ast.BlockStmt:
		t.line("{")
		t.block(s.List)
		t.line("}")
	case *ast.IfStmt:
		t.withInit(s.Init, func() { t.ifElse(s) })
	case *ast.SwitchStmt:
		if s.Tag != nil {
			t.fail(s, "a switch with a tag: write it without")
		}
		t.withInit(s.Init, func() { t.switchCases(s) })
	default:
		t.fail(s, "%T is not in the subset metagen translates", s)
	}
}

// withInit runs emit in a C block that declares init, if there is one.
func (t *translator) withInit(init ast.Stmt, emit func()) {
	if init == nil {
		emit()
		return
	}
	t.line("{")
	t.ind++
	t.stmt(init)
	emit()
	t.ind--
	t.line("}")
}

func (t *translator) ifElse(s *ast.IfStmt) {
	t.line("if (%s) {", t.expr(s.Cond))
	for {
		t.block(s.Body.List)
		switch e := s.Else.(type) {
		case nil:
			t.line("}")
			return
		case *ast.IfStmt:
			if e.Init != nil {
				t.fail(e, "an else if with an init statement")
			}
			t.line("} else if (%s) {", t.expr(e.Cond))
			s = e
		case *ast.BlockStmt:
			t.line("} else {")
			t.block(e.List)
			t.line("}")
			return
		}
	}
}

// switchCases writes a tagless switch as an if chain, its default last, where
// Go takes it.
func (t *translator) switchCases(s *ast.SwitchStmt) {
	var cases []*ast.CaseClause
	var def *ast.CaseClause
	for _, c := range s.Body.List {
		cc := c.(*ast.CaseClause)
		if cc.List == nil {
			def = cc
		} else {
			cases = append(cases, cc)
		}
	}
	for i, c := range cases {
		conds := make([]string, len(c.List))
		for j, e := range c.List {
			conds[j] = t.operand(e)
		}
		if len(conds) == 1 {
			conds[0] = t.expr(c.List[0])
		}
		if i == 0 {
			t.line("if (%s) {", strings.Join(conds, " || "))
		} else {
			t.line("} else if (%s) {", strings.Join(conds, " || "))
		}
		t.block(c.Body)
	}
	switch {
	case def != nil && len(cases) == 0:
		t.line("{")
		t.block(def.Body)
		t.line("}")
	case def != nil:
		t.line("} else {")
		t.block(def.Body)
		t.line("}")
	case len(cases) > 0:
		t.line("}")
	}
}

func (t *translator) assign(s *ast.AssignStmt) {
	switch s.Tok {
	case token.DEFINE, token.ASSIGN:
		if len(s.Lhs) != len(s.Rhs) {
			t.fail(s, "an assignment of a multi-value call")
			return
		}
		if len(s.Lhs) > 1 {
			t.independent(s)
		}
		for i, l := range s.Lhs {
			if s.Tok == token.ASSIGN {
				t.line("%s = %s;", t.expr(l), t.expr(s.Rhs[i]))
				continue
			}
			id := l.(*ast.Ident)
			obj := t.m.info.Defs[id]
			if obj == nil {
				t.fail(l, "%s is declared already: := declares only new names in C", id.Name)
				return
			}
			t.line("%s = %s;", t.decl(l, obj.Type(), id.Name), t.expr(s.Rhs[i]))
		}
	case token.AND_NOT_ASSIGN:
		x := t.expr(s.Lhs[0])
		t.line("%s &= (%s)~%s;", x, t.ctype(s, t.m.info.Types[s.Lhs[0]].Type), t.operand(s.Rhs[0]))
	case token.SHL_ASSIGN, token.SHR_ASSIGN:
		t.shiftCount(s.Lhs[0], s.Rhs[0])
		t.line("%s %s %s;", t.expr(s.Lhs[0]), s.Tok, t.expr(s.Rhs[0]))
	case token.QUO_ASSIGN, token.REM_ASSIGN:
		t.fail(s, "%s: C's division differs from Go's at zero and at the minimum", s.Tok)
	default:
		t.line("%s %s %s;", t.expr(s.Lhs[0]), s.Tok, t.expr(s.Rhs[0]))
	}
}

// independent checks that a tuple assignment can run in order in C: Go reads
// every operand before it assigns, so none may read a target.
func (t *translator) independent(s *ast.AssignStmt) {
	targets := map[types.Object]bool{}
	for _, l := range s.Lhs {
		e := ast.Unparen(l)
		for {
			if ix, ok := e.(*ast.IndexExpr); ok {
				e = ast.Unparen(ix.X)
				continue
			}
			break
		}
		switch e := e.(type) {
		case *ast.Ident:
			targets[t.object(e)] = true
		case *ast.SelectorExpr:
			targets[t.object(e.Sel)] = true
		}
		delete(targets, nil)
	}
	reads := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && targets[t.object(id)] {
				t.fail(id, "a tuple assignment that reads its target %s: split it", id.Name)
			}
			return true
		})
	}
	for _, r := range s.Rhs {
		reads(r)
	}
	for _, l := range s.Lhs {
		ast.Inspect(l, func(n ast.Node) bool {
			if ix, ok := n.(*ast.IndexExpr); ok {
				reads(ix.Index)
			}
			return true
		})
	}
}

func (t *translator) object(id *ast.Ident) types.Object {
	if o := t.m.info.Uses[id]; o != nil {
		return o
	}
	return t.m.info.Defs[id]
}

// operand is e's C, in parentheses unless it is a primary expression.
func (t *translator) operand(e ast.Expr) string {
	s := t.expr(e)
	if t.m.info.Types[e].Value != nil {
		return s
	}
	switch ast.Unparen(e).(type) {
	case *ast.Ident, *ast.SelectorExpr, *ast.CallExpr, *ast.IndexExpr:
		return s
	}
	return "(" + s + ")"
}

func (t *translator) expr(e ast.Expr) string {
	tv := t.m.info.Types[e]
	if tv.Value != nil {
		if tv.Value.Kind() == constant.Bool {
			t.m.usesBool = true
		}
		var c *types.Const
		switch x := ast.Unparen(e).(type) {
		case *ast.Ident:
			c, _ = t.object(x).(*types.Const)
		case *ast.SelectorExpr:
			c, _ = t.object(x.Sel).(*types.Const)
		}
		if name, ok := t.m.constNames[c]; ok && c != nil {
			return name
		}
		s, err := literal(tv.Value, tv.Type)
		if err != nil {
			t.fail(e, "%v", err)
		}
		return s
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return t.expr(e.X)
	case *ast.Ident:
		if v, ok := t.object(e).(*types.Var); ok && !v.IsField() {
			return e.Name
		}
		t.fail(e, "%s is not a local or a parameter", e.Name)
	case *ast.SelectorExpr:
		return t.field(e)
	case *ast.BinaryExpr:
		return t.binary(e)
	case *ast.UnaryExpr:
		switch e.Op {
		case token.NOT:
			return "!" + t.operand(e.X)
		case token.SUB:
			return t.narrow(e, "-"+t.operand(e.X))
		case token.XOR:
			return fmt.Sprintf("(%s)~%s", t.ctype(e, tv.Type), t.operand(e.X))
		}
		t.fail(e, "the operator %s", e.Op)
	case *ast.CallExpr:
		return t.call(e)
	case *ast.IndexExpr:
		switch t.m.info.Types[e.X].Type.Underlying().(type) {
		case *types.Slice, *types.Array:
			return fmt.Sprintf("%s[%s]", t.operand(e.X), t.expr(e.Index))
		}
		t.fail(e, "an index of a %s", t.m.info.Types[e.X].Type)
	default:
		t.fail(e, "%T is not in the subset metagen translates", e)
	}
	return "?"
}

// field is p.A.B, p a pointer to the struct, as p->a_b.
func (t *translator) field(e *ast.SelectorExpr) string {
	var path []string
	var x ast.Expr = e
	for {
		s, ok := ast.Unparen(x).(*ast.SelectorExpr)
		if !ok {
			break
		}
		sel := t.m.info.Selections[s]
		if sel == nil || sel.Kind() != types.FieldVal {
			t.fail(s, "%s is not a field", s.Sel.Name)
			return "?"
		}
		path = append([]string{s.Sel.Name}, path...)
		x = s.X
	}
	p, ok := t.m.info.Types[x].Type.(*types.Pointer)
	if !ok || !types.Identical(p.Elem(), t.m.meta) {
		t.fail(e, "a field of something other than a *%s", t.m.meta.Obj().Name())
		return "?"
	}
	member, ok := t.m.members[strings.Join(path, ".")]
	if !ok {
		t.fail(e, "%s is not a field C has", strings.Join(path, "."))
	}
	return t.operand(x) + "->" + member
}

// narrow wraps arithmetic on types narrower than int in a cast back: C
// computes it in int, Go wraps at the type's width.
func (t *translator) narrow(e ast.Expr, s string) string {
	typ := t.m.info.Types[e].Type
	if b, ok := typ.Underlying().(*types.Basic); ok && b.Info()&types.IsInteger != 0 && types.SizesFor("gc", "amd64").Sizeof(b) < 4 {
		return fmt.Sprintf("(%s)(%s)", t.ctype(e, typ), s)
	}
	return s
}

func (t *translator) binary(e *ast.BinaryExpr) string {
	switch e.Op {
	case token.QUO, token.REM:
		t.fail(e, "%s: C's division differs from Go's at zero and at the minimum", e.Op)
	case token.SHL, token.SHR:
		t.shiftCount(e.X, e.Y)
	case token.AND_NOT:
		return t.narrow(e, fmt.Sprintf("%s & (%s)~%s", t.operand(e.X), t.ctype(e, t.m.info.Types[e].Type), t.operand(e.Y)))
	}
	s := fmt.Sprintf("%s %s %s", t.operand(e.X), e.Op, t.operand(e.Y))
	switch e.Op {
	case token.ADD, token.SUB, token.MUL, token.SHL, token.SHR, token.AND, token.OR, token.XOR:
		return t.narrow(e, s)
	}
	return s
}

// shiftCount accepts constant counts below the width: Go's larger shifts give
// 0 or −1, C's are undefined.
func (t *translator) shiftCount(x, y ast.Expr) {
	v := t.m.info.Types[y].Value
	b, ok := t.m.info.Types[x].Type.Underlying().(*types.Basic)
	n, exact := int64(0), false
	if v != nil {
		n, exact = constant.Int64Val(constant.ToInt(v))
	}
	if !ok || !exact || n < 0 || n >= 8*types.SizesFor("gc", "amd64").Sizeof(b) {
		t.fail(y, "a shift by other than a constant below the width")
	}
}

func (t *translator) call(e *ast.CallExpr) string {
	if tv := t.m.info.Types[e.Fun]; tv.IsType() {
		to, ok1 := tv.Type.Underlying().(*types.Basic)
		from, ok2 := t.m.info.Types[e.Args[0]].Type.Underlying().(*types.Basic)
		if !ok1 || !ok2 || to.Info()&types.IsInteger == 0 || from.Info()&types.IsInteger == 0 {
			t.fail(e, "a conversion other than between integers")
		}
		return fmt.Sprintf("(%s)%s", t.ctype(e, tv.Type), t.operand(e.Args[0]))
	}
	if e.Ellipsis.IsValid() {
		t.fail(e, "a variadic call")
	}
	var fn *types.Func
	var args []string
	switch f := ast.Unparen(e.Fun).(type) {
	case *ast.Ident:
		fn, _ = t.object(f).(*types.Func)
	case *ast.SelectorExpr:
		sel := t.m.info.Selections[f]
		if sel == nil || sel.Kind() != types.MethodVal {
			t.fail(e, "a call of %s", f.Sel.Name)
			return "?"
		}
		fn = sel.Obj().(*types.Func)
		if _, ok := t.m.info.Types[f.X].Type.(*types.Pointer); !ok {
			t.fail(f.X, "a method call on other than a pointer")
		}
		// Data is the one primitive: the first byte of the data window, as
		// Packet.Data has it.
		if fn.Name() == "Data" && len(e.Args) == 0 && types.Identical(fn.Type().(*types.Signature).Recv().Type(), types.NewPointer(t.m.meta)) {
			x := t.operand(f.X)
			return fmt.Sprintf("((uint8_t *)%s->%s + %s->%s)", x, t.member(e, "base"), x, t.member(e, "off"))
		}
		args = append(args, t.expr(f.X))
	}
	name, ok := t.m.funcNames[fn]
	if !ok || fn == nil {
		t.fail(e, "a call of a function not marked //metagen:c")
		return "?"
	}
	for _, a := range e.Args {
		args = append(args, t.expr(a))
	}
	return name + "(" + strings.Join(args, ", ") + ")"
}

func (t *translator) member(n ast.Node, path string) string {
	c, ok := t.m.members[path]
	if !ok {
		t.fail(n, "Data needs the struct's %s field", path)
	}
	return c
}
