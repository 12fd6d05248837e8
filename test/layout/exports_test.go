package layout

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const pluginsPrefix = module + "pkg/plugins"

// TestInspectReadsNoPlugin: the diagnostics read the plugins through
// pluginrt's read-only interfaces, so a plugin's internals can change
// without the inspector. pluginrt itself is the one package under
// pkg/plugins the inspector may link: it imports no plugin.
func TestInspectReadsNoPlugin(t *testing.T) {
	for _, p := range goList(t, "-deps", "../../pkg/inspect") {
		if isPluginPackage(p) && p != pluginsPrefix+"/pluginrt" {
			t.Errorf("pkg/inspect links %s; read the plugins through pluginrt.Diagnostics instead", p)
		}
	}
}

func isPluginPackage(path string) bool {
	return path == pluginsPrefix || strings.HasPrefix(path, pluginsPrefix+"/")
}

// TestPluginExportsHaveUsers: an identifier a package under pkg/plugins
// exports is there for code of another package that ships (cmd/, pkg/).
// One that only its own package or a test uses is an internal made public,
// which every later change inside the plugin then has to keep working.
// The tooling does not count either: the sandbox runs the binary's own
// code path, so it needs nothing the binary does not (and leaving it out
// spares this test the API server's export data).
func TestPluginExportsHaveUsers(t *testing.T) {
	unused, onlyBy := pluginExportUsers(t)
	for _, id := range unused {
		t.Errorf("%s is exported, but no package of cmd/ or pkg/ outside its own uses it (tests and tools/ do not count): unexport it, or read it through pluginrt", id)
	}
	for id, users := range onlyBy {
		t.Logf("%s is used outside its package only by %v", id, users)
	}
}

// pluginExportUsers type-checks every package of cmd/ and pkg/ that
// imports a plugin package (test files left out) and returns the exported
// identifiers of the plugin packages that no other such package uses, and
// for each used one, the packages that use it. Methods a type has to
// satisfy an interface of a package its own package imports (the
// framework's extension points, fmt.Stringer, error) count as used: the
// framework calls them.
func pluginExportUsers(t *testing.T) (unused []string, users map[string][]string) {
	t.Helper()
	type pkgInfo struct {
		path, dir string
		files     []string
		imports   []string
	}
	var pkgs []pkgInfo
	for _, line := range goList(t, "-f", `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}|{{join .Imports ","}}`, "../../cmd/...", "../../pkg/...") {
		f := strings.Split(line, "|")
		p := pkgInfo{path: f[0], dir: f[1], files: split(f[2]), imports: split(f[3])}
		if isPluginPackage(p.path) {
			pkgs = append(pkgs, p)
			continue
		}
		for _, imp := range p.imports {
			if isPluginPackage(imp) {
				pkgs = append(pkgs, p)
				break
			}
		}
	}
	// The export data of every import, as the compiler wrote it.
	var paths []string
	for _, p := range pkgs {
		paths = append(paths, p.imports...)
	}
	exports := map[string]string{}
	for _, line := range goList(t, append([]string{"-export", "-f", `{{.ImportPath}}|{{.Export}}`}, dedup(paths)...)...) {
		path, file, _ := strings.Cut(line, "|")
		exports[path] = file
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}).(types.ImporterFrom)

	used := map[types.Object]map[string]bool{}
	ifaces := map[string][]*types.Interface{}
	for _, p := range pkgs {
		var files []*ast.File
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp}
		checked, err := conf.Check(p.path, fset, files, info)
		if err != nil {
			t.Fatalf("type-check %s: %v", p.path, err)
		}
		if isPluginPackage(p.path) {
			var in []*types.Interface
			for _, dep := range checked.Imports() {
				for _, name := range dep.Scope().Names() {
					if it, ok := dep.Scope().Lookup(name).Type().Underlying().(*types.Interface); ok && it.NumMethods() > 0 {
						in = append(in, it)
					}
				}
			}
			ifaces[p.path] = in
		}
		note := func(obj types.Object) {
			if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() == p.path || !isPluginPackage(obj.Pkg().Path()) {
				return
			}
			if fn, ok := obj.(*types.Func); ok {
				obj = fn.Origin()
			}
			if used[obj] == nil {
				used[obj] = map[string]bool{}
			}
			used[obj][strings.TrimPrefix(p.path, module)] = true
		}
		for _, obj := range info.Uses {
			note(obj)
		}
		for _, sel := range info.Selections {
			note(sel.Obj())
		}
	}

	stringer := types.NewInterfaceType([]*types.Func{types.NewFunc(token.NoPos, nil, "String",
		types.NewSignatureType(nil, nil, nil, nil, types.NewTuple(types.NewVar(token.NoPos, nil, "", types.Typ[types.String])), false))}, nil).Complete()
	errorIface := types.Universe.Lookup("error").Type().Underlying().(*types.Interface)
	implements := func(pkg string, named *types.Named, method string) bool {
		for _, it := range append([]*types.Interface{stringer, errorIface}, ifaces[pkg]...) {
			has := method == ""
			for i := 0; i < it.NumMethods() && !has; i++ {
				has = it.Method(i).Name() == method
			}
			if has && (types.Implements(named, it) || types.Implements(types.NewPointer(named), it)) {
				return true
			}
		}
		return false
	}

	type export struct {
		obj  types.Object
		name string
	}
	var all []export
	for _, p := range pkgs {
		if !isPluginPackage(p.path) {
			continue
		}
		pkg, err := imp.Import(p.path)
		if err != nil {
			t.Fatal(err)
		}
		short := strings.TrimPrefix(p.path, module)
		for _, name := range pkg.Scope().Names() {
			obj := pkg.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			all = append(all, export{obj, short + "." + name})
			named, ok := obj.Type().(*types.Named)
			if _, isType := obj.(*types.TypeName); !ok || !isType {
				continue
			}
			if implements(p.path, named, "") {
				// A plugin the framework runs, an error, a Stringer:
				// used through the interface.
				used[obj] = map[string]bool{"(interface)": true}
			}
			for i := 0; i < named.NumMethods(); i++ {
				if m := named.Method(i); m.Exported() && !implements(p.path, named, m.Name()) {
					all = append(all, export{m, short + "." + name + "." + m.Name()})
				}
			}
		}
	}
	// An exported type that a used export's signature or fields name is
	// part of that export's API.
	for changed := true; changed; {
		changed = false
		for _, e := range all {
			if len(used[e.obj]) == 0 {
				continue
			}
			typ := e.obj.Type()
			if _, isType := e.obj.(*types.TypeName); isType {
				typ = typ.Underlying()
			}
			for _, named := range namedIn(typ, map[types.Type]bool{}) {
				obj := named.Obj()
				if obj.Pkg() != nil && isPluginPackage(obj.Pkg().Path()) && obj.Exported() && len(used[obj]) == 0 {
					used[obj] = map[string]bool{"(API of " + e.name + ")": true}
					changed = true
				}
			}
		}
	}
	users = map[string][]string{}
	for _, e := range all {
		by := used[e.obj]
		if len(by) == 0 {
			unused = append(unused, e.name)
			continue
		}
		for u := range by {
			users[e.name] = append(users[e.name], u)
		}
		sort.Strings(users[e.name])
	}
	sort.Strings(unused)
	return unused, users
}

// namedIn lists the named types typ is built from, one level deep: a
// struct's fields, a signature's parameters and results, element types.
func namedIn(typ types.Type, seen map[types.Type]bool) []*types.Named {
	if seen[typ] {
		return nil
	}
	seen[typ] = true
	switch t := typ.(type) {
	case *types.Named:
		return []*types.Named{t}
	case *types.Pointer:
		return namedIn(t.Elem(), seen)
	case *types.Slice:
		return namedIn(t.Elem(), seen)
	case *types.Array:
		return namedIn(t.Elem(), seen)
	case *types.Map:
		return append(namedIn(t.Key(), seen), namedIn(t.Elem(), seen)...)
	case *types.Chan:
		return namedIn(t.Elem(), seen)
	case *types.Signature:
		var out []*types.Named
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := 0; i < tup.Len(); i++ {
				out = append(out, namedIn(tup.At(i).Type(), seen)...)
			}
		}
		return out
	case *types.Struct:
		var out []*types.Named
		for i := 0; i < t.NumFields(); i++ {
			if t.Field(i).Exported() {
				out = append(out, namedIn(t.Field(i).Type(), seen)...)
			}
		}
		return out
	case *types.Interface:
		var out []*types.Named
		for i := 0; i < t.NumMethods(); i++ {
			out = append(out, namedIn(t.Method(i).Type(), seen)...)
		}
		return out
	}
	return nil
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func dedup(in []string) []string {
	sort.Strings(in)
	var out []string
	for i, s := range in {
		if (i == 0 || s != in[i-1]) && s != "C" && s != "unsafe" {
			out = append(out, s)
		}
	}
	return out
}
