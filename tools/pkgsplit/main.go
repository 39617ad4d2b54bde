// Command pkgsplit moves a set of files out of a Go package into a new package below it, as
// issue 12 split go/session: the moved files keep their code; what the rest of the package (its
// tests included) uses of them is exported; unexported methods it calls become package
// functions (-funcify), so public types gain no methods; reads of unexported fields go through
// getters (-fieldget); every use is qualified with the new package's name, and -alias writes
// re-exports of the moved public names (with their doc comments) into the old package. It
// refuses (listing why) when the moved code uses the rest of the package, when a method would be
// separated from its type, when an export collides, or when a local name shadows the new
// package's at a use. Run it from the workspace root:
//
//	go run . -root /path/to/ws -pkg example.com/m/p -name sub -newpath example.com/m/p/sub \
//	  -newdir /path/to/ws/p/sub -files a.go,b.go -funcify [-check]
//
// It is a maintainer's tool: its own module, outside go.work and the Bazel build.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/packages"
)

var (
	root        = flag.String("root", ".", "workspace root")
	pkgPath     = flag.String("pkg", "", "import path of the package to split")
	newName     = flag.String("name", "", "new package name")
	newPath     = flag.String("newpath", "", "new package import path")
	newDir      = flag.String("newdir", "", "new package directory")
	files       = flag.String("files", "", "comma-separated base names of files to move")
	renames     = flag.String("rename", "", "comma-separated overrides old=New (package level) or Type.old=New")
	check       = flag.Bool("check", false, "only report")
	aliasOut    = flag.String("alias", "", "file (in the old package) to write aliases of moved exported names into")
	noExport    = flag.String("keep", "", "comma-separated exported names not to alias")
	movedList   = flag.String("movedlist", "", "write the moved package-level names (as exported) to this file")
	fieldReport = flag.Bool("fields", false, "report field uses from unmoved code")
	funcify     = flag.Bool("funcify", false, "turn unexported methods of moved types used outside into package functions")
	fieldGet    = flag.String("fieldget", "", "field=Method (reads from unmoved code become X.Method()) or field=pkg:Func (pkg.Func(X))")
)

var docOf func(types.Object, string) string

type edit struct {
	off, end int
	text     string
	prio     int
}

func main() {
	flag.Parse()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports, Dir: *root, Tests: true}
	pkgs, err := packages.Load(cfg, *pkgPath)
	if err != nil {
		die("%v", err)
	}
	var p *packages.Package
	for _, q := range pkgs {
		if q.PkgPath == *pkgPath && strings.Contains(q.ID, ".test]") {
			p = q
		}
	}
	if p == nil {
		for _, q := range pkgs {
			if q.PkgPath == *pkgPath {
				p = q
			}
		}
	}
	if p == nil {
		die("package not found")
	}
	if len(p.Errors) > 0 {
		for _, e := range p.Errors {
			fmt.Fprintln(os.Stderr, e)
		}
		die("package has errors")
	}
	fset := p.Fset
	moved := map[string]bool{}
	for _, f := range strings.Split(*files, ",") {
		if f != "" {
			moved[f] = true
		}
	}
	fileOf := func(pos token.Pos) string { return filepath.Base(fset.Position(pos).Filename) }
	isMoved := func(pos token.Pos) bool { return moved[fileOf(pos)] }
	pkgScope := p.Types.Scope()
	isPkgLevel := func(o types.Object) bool {
		return o != nil && o.Pkg() == p.Types && o.Parent() == pkgScope
	}
	// Objects declared in moved files.
	movedObjs := map[types.Object]bool{}
	for _, name := range pkgScope.Names() {
		o := pkgScope.Lookup(name)
		if isMoved(o.Pos()) {
			movedObjs[o] = true
		}
	}
	for f := range moved {
		found := false
		for _, sf := range p.Syntax {
			if fileOf(sf.Package) == f {
				found = true
			}
		}
		if !found {
			die("file %s not in package", f)
		}
	}
	overrides := map[string]string{}
	for _, kv := range strings.Split(*renames, ",") {
		if kv == "" {
			continue
		}
		a, b, _ := strings.Cut(kv, "=")
		overrides[a] = b
	}
	var problems []string
	// Check: moved files reference nothing of unmoved files (package level), methods stay with
	// their types.
	needExport := map[types.Object]bool{} // objects declared in moved files used from unmoved files
	methodNames := map[string]bool{}      // unexported method names to export package-wide
	usedMethods := map[*types.Func]bool{}
	getters := map[string]string{}
	for _, kv := range strings.Split(*fieldGet, ",") {
		if a, b, ok := strings.Cut(kv, "="); ok {
			getters[a] = b
		}
	}
	parents := map[ast.Node]ast.Node{}
	for _, sf := range p.Syntax {
		var stack []ast.Node
		ast.Inspect(sf, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			if len(stack) > 0 {
				parents[n] = stack[len(stack)-1]
			}
			stack = append(stack, n)
			return true
		})
	}
	for id, o := range p.TypesInfo.Uses {
		if o == nil || o.Pkg() != p.Types {
			continue
		}
		from := isMoved(id.Pos())
		if isPkgLevel(o) {
			if from && !isMoved(o.Pos()) {
				problems = append(problems, fmt.Sprintf("%s: moved code uses %s (declared in %s)", fset.Position(id.Pos()), o.Name(), fileOf(o.Pos())))
			}
			if !from && isMoved(o.Pos()) && !o.Exported() {
				needExport[o] = true
			}
			continue
		}
		// fields and methods
		switch v := o.(type) {
		case *types.Var:
			if v.IsField() && !from && isMoved(v.Pos()) && !v.Exported() {
				needExport[o] = true
			}
		case *types.Func:
			if !from && isMoved(v.Pos()) && !v.Exported() {
				usedMethods[v] = true
			}
		}
	}
	// Composite literal keys are recorded in Uses for fields; selections in Selections.
	for sel, s := range p.TypesInfo.Selections {
		o := s.Obj()
		if o.Pkg() != p.Types || o.Exported() {
			continue
		}
		from := isMoved(sel.Sel.Pos())
		if !from && isMoved(o.Pos()) {
			if f, ok := o.(*types.Func); ok {
				usedMethods[f] = true
			} else {
				needExport[o] = true
			}
		}
	}
	// Method declarations must be in the same file set as their receiver type; unexported
	// interface methods of moved interfaces implemented outside must be exported.
	for _, sf := range p.Syntax {
		fm := moved[fileOf(sf.Package)]
		for _, d := range sf.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			fn := p.TypesInfo.Defs[fd.Name].(*types.Func)
			recv := fn.Type().(*types.Signature).Recv().Type()
			if pt, ok := recv.(*types.Pointer); ok {
				recv = pt.Elem()
			}
			named, ok := recv.(*types.Named)
			if !ok {
				continue
			}
			if isMoved(named.Obj().Pos()) != fm {
				problems = append(problems, fmt.Sprintf("%s: method %s.%s is declared apart from its type (in %s)", fset.Position(fd.Pos()), named.Obj().Name(), fn.Name(), fileOf(named.Obj().Pos())))
			}
		}
	}
	// Interfaces with unexported methods implemented across the move: export those methods.
	implements := func(tn *types.TypeName, it *types.Interface) bool {
		return types.Implements(tn.Type(), it) || types.Implements(types.NewPointer(tn.Type()), it)
	}
	for _, iname := range pkgScope.Names() {
		itn, ok := pkgScope.Lookup(iname).(*types.TypeName)
		if !ok {
			continue
		}
		it, ok := itn.Type().Underlying().(*types.Interface)
		if !ok || it.NumMethods() == 0 {
			continue
		}
		for _, name := range pkgScope.Names() {
			tn, ok := pkgScope.Lookup(name).(*types.TypeName)
			if !ok || isMoved(tn.Pos()) == isMoved(itn.Pos()) {
				continue
			}
			if _, isIface := tn.Type().Underlying().(*types.Interface); isIface || !implements(tn, it) {
				continue
			}
			for i := 0; i < it.NumMethods(); i++ {
				if m := it.Method(i); !m.Exported() {
					methodNames[m.Name()] = true
				}
			}
		}
	}
	funcObjs := map[*types.Func]string{}
	for f := range usedMethods {
		if *funcify && !methodNames[f.Name()] {
			if _, isIface := f.Type().(*types.Signature).Recv().Type().Underlying().(*types.Interface); !isIface {
				n := f.Name()
				if v, ok := overrides["func:"+n]; ok {
					n = v
				} else {
					r := []rune(n)
					r[0] = unicode.ToUpper(r[0])
					n = string(r)
				}
				funcObjs[f] = n
				continue
			}
		}
		methodNames[f.Name()] = true
	}
	{
		seen := map[string]bool{}
		for f, n := range funcObjs {
			if pkgScope.Lookup(n) != nil || seen[n] {
				problems = append(problems, fmt.Sprintf("funcified %s as %s collides (override func:%s=Name)", f.Name(), n, f.Name()))
			}
			seen[n] = true
		}
	}
	// Field getters.
	type getterSite struct {
		id   *ast.Ident
		se   *ast.SelectorExpr
		spec string
	}
	var getterSites []getterSite
	for id, o := range p.TypesInfo.Uses {
		v, ok := o.(*types.Var)
		if !ok || !v.IsField() || !isMoved(v.Pos()) || isMoved(id.Pos()) || v.Exported() {
			continue
		}
		spec, ok := getters[v.Name()]
		if !ok {
			continue
		}
		delete(needExport, o)
		se, ok := parents[id].(*ast.SelectorExpr)
		bad := !ok || se.Sel != id
		if ok {
			switch g := parents[se].(type) {
			case *ast.AssignStmt:
				for _, l := range g.Lhs {
					if l == se {
						bad = true
					}
				}
			case *ast.UnaryExpr:
				bad = bad || g.Op == token.AND
			case *ast.IncDecStmt:
				bad = true
			}
		}
		if bad {
			problems = append(problems, fmt.Sprintf("%s: field %s is written, addressed or a literal key outside", fset.Position(id.Pos()), v.Name()))
			continue
		}
		getterSites = append(getterSites, getterSite{id, se, spec})
	}
	if *fieldReport {
		{
			counts := map[string]int{}
			for id, o := range p.TypesInfo.Uses {
				v, ok := o.(*types.Var)
				if !ok || !v.IsField() || !isMoved(v.Pos()) || isMoved(id.Pos()) || v.Exported() {
					continue
				}
				kind := "read"
				par := parents[id]
				if kv, ok := par.(*ast.KeyValueExpr); ok && kv.Key == id {
					kind = "complit"
				} else if se, ok := par.(*ast.SelectorExpr); ok {
					gp := parents[se]
					switch g := gp.(type) {
					case *ast.AssignStmt:
						for _, l := range g.Lhs {
							if l == se {
								kind = "write"
							}
						}
					case *ast.UnaryExpr:
						if g.Op == token.AND {
							kind = "addr"
						}
					case *ast.IncDecStmt:
						kind = "write"
					}
				}
				counts[v.Name()+" "+kind]++
				{
					fmt.Printf("SITE %s: %s %s\n", fset.Position(id.Pos()), kind, v.Name())
				}
			}
			var ks []string
			for k := range counts {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for _, k := range ks {
				fmt.Println(k, counts[k])
			}
		}
	}
	// New names.
	newNameOf := func(o types.Object) string {
		key := o.Name()
		if v, ok := o.(*types.Var); ok && v.IsField() {
			key = "." + o.Name()
		}
		if n, ok := overrides[key]; ok {
			return n
		}
		r := []rune(o.Name())
		if r[0] == '_' || !unicode.IsLetter(r[0]) {
			return ""
		}
		r[0] = unicode.ToUpper(r[0])
		return string(r)
	}
	renameOf := map[types.Object]string{}
	for o := range needExport {
		n := newNameOf(o)
		if n == "" {
			problems = append(problems, fmt.Sprintf("cannot export %s", o.Name()))
			continue
		}
		renameOf[o] = n
		if isPkgLevel(o) {
			if pkgScope.Lookup(n) != nil {
				problems = append(problems, fmt.Sprintf("export of %s as %s collides", o.Name(), n))
			}
		}
	}
	methodRename := map[string]string{}
	for m := range methodNames {
		n := m
		if v, ok := overrides["()"+m]; ok {
			n = v
		} else {
			r := []rune(m)
			r[0] = unicode.ToUpper(r[0])
			n = string(r)
		}
		methodRename[m] = n
	}
	// Field/method collisions: a type that has both.
	for o, n := range renameOf {
		if v, ok := o.(*types.Var); ok && v.IsField() {
			_ = v
			// find struct owning it
			for _, name := range pkgScope.Names() {
				tn, ok := pkgScope.Lookup(name).(*types.TypeName)
				if !ok {
					continue
				}
				st, ok := tn.Type().Underlying().(*types.Struct)
				if !ok {
					continue
				}
				for i := 0; i < st.NumFields(); i++ {
					if st.Field(i) == o {
						obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(tn.Type()), true, p.Types, n)
						if obj != nil {
							problems = append(problems, fmt.Sprintf("field %s.%s -> %s collides with %s (override with .%s=Name)", name, o.Name(), n, obj, o.Name()))
						}
					}
				}
			}
		}
	}
	for m, n := range methodRename {
		for _, name := range pkgScope.Names() {
			tn, ok := pkgScope.Lookup(name).(*types.TypeName)
			if !ok {
				continue
			}
			obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(tn.Type()), true, p.Types, m)
			if obj == nil {
				continue
			}
			obj2, _, _ := types.LookupFieldOrMethod(types.NewPointer(tn.Type()), true, p.Types, n)
			if obj2 != nil {
				problems = append(problems, fmt.Sprintf("method %s.%s -> %s collides with %s (override with ()%s=Name)", name, m, n, obj2, m))
			}
		}
	}
	// Package name shadowing at qualification sites.
	qualSites := map[*ast.Ident]types.Object{}
	for id, o := range p.TypesInfo.Uses {
		if isPkgLevel(o) && isMoved(o.Pos()) && !isMoved(id.Pos()) {
			qualSites[id] = o
			sc := p.Types.Scope().Innermost(id.Pos())
			if sc != nil {
				if _, obj := sc.LookupParent(*newName, id.Pos()); obj != nil {
					if _, isPkg := obj.(*types.PkgName); !isPkg {
						problems = append(problems, fmt.Sprintf("%s: %s shadows the package name here (%s)", fset.Position(id.Pos()), *newName, obj))
					}
				}
			}
		}
	}
	sort.Strings(problems)
	for _, pr := range problems {
		fmt.Println("PROBLEM:", pr)
	}
	// Report.
	var names []string
	for o, n := range renameOf {
		names = append(names, fmt.Sprintf("%s -> %s", o.Name(), n))
	}
	for m, n := range methodRename {
		names = append(names, fmt.Sprintf("method %s -> %s", m, n))
	}
	for f, n := range funcObjs {
		names = append(names, fmt.Sprintf("func %s.%s -> %s", f.Type().(*types.Signature).Recv().Type(), f.Name(), n))
	}
	sort.Strings(names)
	fmt.Printf("%d renames, %d qualification sites, %d problems\n", len(names), len(qualSites), len(problems))
	for _, n := range names {
		fmt.Println("  ", n)
	}
	if *check || len(problems) > 0 {
		if len(problems) > 0 {
			os.Exit(1)
		}
		return
	}
	// Edits per file.
	edits := map[string][]edit{}
	add := func(pos token.Pos, old, text string) {
		ps := fset.Position(pos)
		edits[ps.Filename] = append(edits[ps.Filename], edit{ps.Offset, ps.Offset + len(old), text, 0})
	}
	isRenamedMethod := func(o types.Object) (string, bool) {
		f, ok := o.(*types.Func)
		if !ok || f.Pkg() != p.Types {
			return "", false
		}
		sig := f.Type().(*types.Signature)
		if sig.Recv() == nil {
			return "", false
		}
		n, ok := methodRename[f.Name()]
		return n, ok
	}
	for id, o := range p.TypesInfo.Defs {
		if o == nil {
			continue
		}
		if n, ok := renameOf[o]; ok {
			add(id.Pos(), id.Name, n)
		} else if n, ok := isRenamedMethod(o); ok {
			add(id.Pos(), id.Name, n)
		}
	}
	for id, o := range p.TypesInfo.Uses {
		n, renamed := renameOf[o]
		if !renamed {
			if mn, ok := isRenamedMethod(o); ok {
				n, renamed = mn, true
			}
		}
		name := id.Name
		if renamed {
			name = n
		}
		if _, q := qualSites[id]; q {
			add(id.Pos(), id.Name, *newName+"."+name)
		} else if renamed {
			add(id.Pos(), id.Name, name)
		}
	}
	offOf := func(pos token.Pos) int { return fset.Position(pos).Offset }
	covers := map[string][][2]int{} // ranges rewritten whole: edits inside them are dropped
	addAt := func(pos token.Pos, end token.Pos, text string, prio int) {
		ps := fset.Position(pos)
		edits[ps.Filename] = append(edits[ps.Filename], edit{ps.Offset, offOf(end), text, prio})
	}
	for _, g := range getterSites {
		if pkgFn, ok := strings.CutPrefix(g.spec, "pkg:"); ok {
			star := ""
			if _, ptr := p.TypesInfo.TypeOf(g.se.X).(*types.Pointer); ptr {
				star = "*"
			}
			addAt(g.se.X.Pos(), g.se.X.Pos(), *newName+"."+pkgFn+"("+star, offOf(g.se.End()))
			addAt(g.se.X.End(), g.id.End(), ")", 0)
		} else {
			addAt(g.id.Pos(), g.id.End(), g.spec+"()", 0)
		}
	}
	for sel, sl := range p.TypesInfo.Selections {
		f, ok := sl.Obj().(*types.Func)
		if !ok {
			continue
		}
		n, ok := funcObjs[f]
		if !ok {
			continue
		}
		call, ok := parents[sel].(*ast.CallExpr)
		if !ok || call.Fun != sel || sl.Kind() != types.MethodVal || len(sl.Index()) > 1 {
			fmt.Println("PROBLEM (late):", fset.Position(sel.Pos()), "method", f.Name(), "not called directly")
			os.Exit(1)
		}
		q := ""
		if !isMoved(sel.Pos()) {
			q = *newName + "."
		}
		amp := ""
		_, recvPtr := f.Type().(*types.Signature).Recv().Type().(*types.Pointer)
		_, xPtr := p.TypesInfo.TypeOf(sel.X).(*types.Pointer)
		if recvPtr && !xPtr {
			amp = "&"
		} else if !recvPtr && xPtr {
			amp = "*"
		}
		addAt(sel.X.Pos(), sel.X.Pos(), q+n+"("+amp, offOf(call.End()))
		sep := ""
		if len(call.Args) > 0 {
			sep = ", "
		}
		addAt(sel.X.End(), call.Lparen+1, sep, 0)
	}
	for _, sf := range p.Syntax {
		for _, d := range sf.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			f := p.TypesInfo.Defs[fd.Name].(*types.Func)
			n, ok := funcObjs[f]
			if !ok {
				continue
			}
			rf := fd.Recv.List[0]
			rname := "_"
			if len(rf.Names) > 0 {
				rname = rf.Names[0].Name
			}
			rt := f.Type().(*types.Signature).Recv().Type()
			star := ""
			if pt, ok := rt.(*types.Pointer); ok {
				star, rt = "*", pt.Elem()
			}
			tn := rt.(*types.Named).Obj()
			tname := tn.Name()
			if nn, ok := renameOf[tn]; ok {
				tname = nn
			}
			sep := ""
			if fd.Type.Params.NumFields() > 0 {
				sep = ", "
			}
			addAt(fd.Recv.Opening, fd.Type.Params.Opening+1, n+"("+rname+" "+star+tname+sep, 0)
			ps := fset.Position(fd.Recv.Opening)
			covers[ps.Filename] = append(covers[ps.Filename], [2]int{ps.Offset, offOf(fd.Type.Params.Opening + 1)})
		}
	}
	// Implicit: embedded fields are Defs of the field var whose ident is the type name; handled by Uses on the type ident.
	qualified := map[string]bool{}
	for id := range qualSites {
		qualified[fset.Position(id.Pos()).Filename] = true
	}
	docs := map[types.Object]string{}
	for _, sf := range p.Syntax {
		for _, d := range sf.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Doc != nil {
					docs[p.TypesInfo.Defs[d.Name]] = d.Doc.Text()
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					doc := d.Doc
					var ids []*ast.Ident
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						if sp.Doc != nil {
							doc = sp.Doc
						}
						ids = []*ast.Ident{sp.Name}
					case *ast.ValueSpec:
						if sp.Doc != nil {
							doc = sp.Doc
						} else if len(d.Specs) > 1 {
							doc = nil
							if sp.Comment != nil {
								doc = sp.Comment
							}
						}
						ids = sp.Names
					}
					if doc != nil {
						for _, id := range ids {
							docs[p.TypesInfo.Defs[id]] = doc.Text()
						}
					}
				}
			}
		}
	}
	docOf = func(o types.Object, def string) string {
		t, ok := docs[o]
		if !ok {
			return def
		}
		var b strings.Builder
		for _, l := range strings.Split(strings.TrimRight(t, "\n"), "\n") {
			b.WriteString("// " + l + "\n")
		}
		return strings.ReplaceAll(b.String(), "// \n", "//\n")
	}
	for fn, es := range edits {
		for _, e := range es {
			if strings.HasPrefix(e.text, *newName+".") {
				qualified[fn] = true
			}
		}
	}
	// Apply.
	for _, sf := range p.Syntax {
		fn := fset.Position(sf.Package).Filename
		src, err := os.ReadFile(fn)
		if err != nil {
			die("%v", err)
		}
		var es []edit
		for _, e := range edits[fn] {
			inside := false
			for _, c := range covers[fn] {
				if e.off >= c[0] && e.end <= c[1] && !(e.off == c[0] && e.end == c[1]) {
					inside = true
				}
			}
			if !inside {
				es = append(es, e)
			}
		}
		sort.Slice(es, func(i, j int) bool {
			if es[i].off != es[j].off {
				return es[i].off > es[j].off
			}
			if (es[i].end > es[i].off) != (es[j].end > es[j].off) {
				return es[i].end > es[i].off
			}
			return es[i].prio < es[j].prio
		})
		last := -1
		for _, e := range es {
			if last >= 0 && e.end > last {
				continue // duplicate
			}
			src = append(src[:e.off], append([]byte(e.text), src[e.end:]...)...)
			last = e.off
		}
		base := filepath.Base(fn)
		if moved[base] {
			src = bytes.Replace(src, []byte("package "+p.Types.Name()+"\n"), []byte("package "+*newName+"\n"), 1)
		}
		if qualified[fn] {
			fs2 := token.NewFileSet()
			f2, err := parser.ParseFile(fs2, fn, src, parser.ParseComments)
			if err != nil {
				die("%s: %v", fn, err)
			}
			astutil.AddImport(fs2, f2, *newPath)
			var buf bytes.Buffer
			if err := format.Node(&buf, fs2, f2); err != nil {
				die("%v", err)
			}
			src = buf.Bytes()
		}
		out, err := format.Source(src)
		if err != nil {
			die("%s: %v", fn, err)
		}
		dst := fn
		if moved[base] {
			dst = filepath.Join(*newDir, base)
			os.MkdirAll(*newDir, 0o755)
			os.Remove(fn)
		}
		if err := os.WriteFile(dst, out, 0o644); err != nil {
			die("%v", err)
		}
	}
	if *movedList != "" {
		var ns []string
		for o := range movedObjs {
			n := o.Name()
			if r, ok := renameOf[o]; ok {
				n = r
			}
			if token.IsExported(n) {
				ns = append(ns, n)
			}
		}
		sort.Strings(ns)
		os.WriteFile(*movedList, []byte(strings.Join(ns, "\n")+"\n"), 0o644)
	}
	// Aliases for exported moved names.
	if *aliasOut != "" {
		keep := map[string]bool{}
		for _, k := range strings.Split(*noExport, ",") {
			keep[k] = true
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "package %s\n\nimport %q\n\n", p.Types.Name(), *newPath)
		var ns []string
		for o := range movedObjs {
			if o.Exported() && !keep[o.Name()] && !strings.HasSuffix(fileOf(o.Pos()), "_test.go") {
				ns = append(ns, o.Name())
			}
		}
		sort.Strings(ns)
		qual := func(pk *types.Package) string {
			if pk == p.Types {
				return *newName
			}
			return pk.Name()
		}
		for _, n := range ns {
			o := pkgScope.Lookup(n)
			switch v := o.(type) {
			case *types.TypeName:
				tp := ""
				if nt, ok := v.Type().(*types.Named); ok && nt.TypeParams().Len() > 0 {
					tp = "[...]"
				}
				fmt.Fprintf(&b, "%stype %s%s = %s.%s\n\n", docOf(o, fmt.Sprintf("// %s is %s.%s.\n", n, *newName, n)), n, tp, *newName, n)
			case *types.Const:
				fmt.Fprintf(&b, "%sconst %s = %s.%s\n\n", docOf(o, fmt.Sprintf("// %s is %s.%s.\n", n, *newName, n)), n, *newName, n)
			case *types.Var:
				fmt.Fprintf(&b, "%svar %s = %s.%s\n\n", docOf(o, fmt.Sprintf("// %s is %s.%s.\n", n, *newName, n)), n, *newName, n)
			case *types.Func:
				sig := v.Type().(*types.Signature)
				s := types.TypeString(sig, qual)
				s = strings.TrimPrefix(s, "func")
				var args []string
				for i := 0; i < sig.Params().Len(); i++ {
					a := sig.Params().At(i).Name()
					if i == sig.Params().Len()-1 && sig.Variadic() {
						a += "..."
					}
					args = append(args, a)
				}
				ret := ""
				if sig.Results().Len() > 0 {
					ret = "return "
				}
				tps := ""
				callT := ""
				if sig.TypeParams().Len() > 0 {
					var tn []string
					for i := 0; i < sig.TypeParams().Len(); i++ {
						tn = append(tn, sig.TypeParams().At(i).Obj().Name())
					}
					callT = "[" + strings.Join(tn, ", ") + "]"
				}
				fmt.Fprintf(&b, "%sfunc %s%s%s { %s%s.%s%s(%s) }\n\n", docOf(o, fmt.Sprintf("// %s calls %s.%s.\n", n, *newName, n)), n, tps, s, ret, *newName, n, callT, strings.Join(args, ", "))
			}
		}
		out, err := format.Source(b.Bytes())
		if err != nil {
			os.WriteFile(*aliasOut, b.Bytes(), 0o644)
			fmt.Println("alias file does not format:", err)
			return
		}
		os.WriteFile(*aliasOut, out, 0o644)
	}
}

func die(f string, a ...any) {
	fmt.Fprintf(os.Stderr, f+"\n", a...)
	os.Exit(1)
}
