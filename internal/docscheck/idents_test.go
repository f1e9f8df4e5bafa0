package docscheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// decls is what the module's Go files declare, exported names only.
type decls struct {
	pkgs    map[string]map[string]bool // package name -> its top-level names
	members map[string]map[string]bool // type name -> its methods and fields
	any     map[string]bool            // every exported name: top level, method, field, test
	tests   map[string][]string        // package name -> its test functions
}

var testFunc = regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)`)

func (d *decls) addMember(typ, name string) {
	if d.members[typ] == nil {
		d.members[typ] = map[string]bool{}
	}
	d.members[typ][name] = true
	d.any[name] = true
}

// receiver is the type name of a method's receiver: T, *T, T[X], *T[X].
func receiver(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiver(x.X)
	case *ast.IndexExpr:
		return receiver(x.X)
	case *ast.IndexListExpr:
		return receiver(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

func (d *decls) addFields(typ string, fl *ast.FieldList) {
	if fl == nil {
		return
	}
	for _, f := range fl.List {
		for _, n := range f.Names {
			if n.IsExported() {
				d.addMember(typ, n.Name)
			}
		}
		if len(f.Names) == 0 { // embedded: its name is a member too
			if n := receiver(f.Type); n != "" {
				d.addMember(typ, n)
			} else if sel, ok := f.Type.(*ast.SelectorExpr); ok {
				d.addMember(typ, sel.Sel.Name)
			}
		}
	}
}

// collect parses every non-test Go file under root (node_modules and
// testdata aside) for its exported declarations.
func collect(t *testing.T, root string) *decls {
	d := &decls{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, any: map[string]bool{}, tests: map[string][]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			switch e.Name() {
			case "node_modules", "testdata", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if clientExport.MatchString(path) {
			return clientNames(d, path)
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") { // only its tests, benchmarks, fuzz targets and examples
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && testFunc.MatchString(fn.Name.Name) {
					d.any[fn.Name.Name] = true
					d.tests[f.Name.Name] = append(d.tests[f.Name.Name], fn.Name.Name)
				}
			}
			return nil
		}
		pkg := f.Name.Name
		if d.pkgs[pkg] == nil {
			d.pkgs[pkg] = map[string]bool{}
		}
		top := func(n string) {
			if ast.IsExported(n) {
				d.pkgs[pkg][n] = true
				d.any[n] = true
			}
		}
		if pkg == "conformance" { // its cases are named by strings: {"Name", fn}
			ast.Inspect(f, func(n ast.Node) bool {
				if cl, ok := n.(*ast.CompositeLit); ok && len(cl.Elts) == 2 {
					if lit, ok := cl.Elts[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if name, err := strconv.Unquote(lit.Value); err == nil && ast.IsExported(name) {
							d.any[name] = true
						}
					}
				}
				return true
			})
		}
		for _, decl := range f.Decls {
			switch x := decl.(type) {
			case *ast.FuncDecl:
				if x.Recv != nil && len(x.Recv.List) == 1 {
					if x.Name.IsExported() {
						d.addMember(receiver(x.Recv.List[0].Type), x.Name.Name)
					}
					continue
				}
				top(x.Name.Name)
			case *ast.GenDecl:
				for _, s := range x.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						top(s.Name.Name)
						switch tt := s.Type.(type) {
						case *ast.StructType:
							d.addFields(s.Name.Name, tt.Fields)
						case *ast.InterfaceType:
							d.addFields(s.Name.Name, tt.Methods)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							top(n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return d
}

// clientExport matches the sources of the Python and TypeScript clients,
// whose exported names README.md and the docs name too.
var clientExport = regexp.MustCompile(`clients/(typescript/src/.*\.ts|python/src/.*\.py)$`)

// clientDecl is a declaration of a client's source: a TypeScript export,
// a Python class, function or method.
var clientDecl = regexp.MustCompile(`(?m)^(?:export\s+(?:default\s+)?(?:abstract\s+)?(?:async\s+)?(?:class|function|interface|type|const|enum)\s+|\s*(?:async\s+)?(?:def|class)\s+|\s+(?:async\s+)?(?:static\s+)?)([A-Za-z_]\w*)\s*[(<:={ ]`)

func clientNames(d *decls, path string) error {
	b, err := os.ReadFile(path) // #nosec G304 -- the repository's own sources
	if err != nil {
		return err
	}
	for _, m := range clientDecl.FindAllStringSubmatch(string(b), -1) {
		d.any[m[1]] = true
	}
	return nil
}

// external are names of other projects the docs rightly name: HTTP
// headers and cookie attributes, Claude Code's hook events, the standard
// library's functions named without their package.
var external = map[string]bool{
	"Origin": true, "Host": true, "Authorization": true, "HttpOnly": true, "Secure": true,
	"PreToolUse": true, "PostToolUse": true, "SessionStart": true, "UserPromptSubmit": true,
	"Gosched": true, "Lstat": true, "WalkDir": true,
}

// stdNames are the last elements of the standard library's package
// paths: `json.Marshal` names encoding/json, not backend/json.
func stdNames(t *testing.T) map[string]bool {
	out, err := exec.Command("go", "list", "std").Output()
	require.NoError(t, err)
	set := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		set[p[strings.LastIndex(p, "/")+1:]] = true
	}
	return set
}

var (
	inline = regexp.MustCompile("`([^`\n]+)`")
	// qualified: pkg.Name, Type.Member, pkg.Type.Member, (*Type).Member,
	// with an optional call or a trailing generic.
	qualified = regexp.MustCompile(`^\(?\*?([A-Za-z]\w*)\)?\.([A-Z]\w*)(?:\.([A-Z]\w*))?(?:\(.*\))?$`)
	// bare: one exported Go-looking name (CamelCase, a lower-case letter
	// in it, no separators), with an optional call.
	bare = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)(?:\(.*\))?$`)
)

// foreign are the docs whose identifiers are another language's (the
// clients and the SDKs they plug into); their `pkg.Name` forms are still
// checked when pkg is one of ours.
var foreign = map[string]bool{
	"python.md": true, "typescript.md": true, "langgraph.md": true,
	"openai-agents.md": true, "adk.md": true, "compare.md": true,
}

// TestDocsNameOnlyIdentifiersThatExist reads every inline code span of
// README.md and docs/*.md that looks like a Go identifier and fails on
// one no package of the module declares (a doc naming a function that
// was renamed or never written).
func TestDocsNameOnlyIdentifiersThatExist(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	require.NoError(t, err)
	root := strings.TrimSpace(string(out))
	d := collect(t, root)
	std := stdNames(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join(root, "README.md"))
	var bad []string
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f) // #nosec G304 -- the repository's own docs
		require.NoError(t, err)
		base := filepath.Base(f)
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range inline.FindAllStringSubmatch(line, -1) {
				span := strings.TrimSpace(m[1])
				where := base + ":" + strconv.Itoa(i+1) + ": `" + span + "`"
				if q := qualified.FindStringSubmatch(span); q != nil {
					first, second, third := q[1], q[2], q[3]
					switch {
					case d.pkgs[first] != nil && !std[first]: // pkg.Name[.Member]
						checked++
						if testFunc.MatchString(second) {
							if !slices.Contains(d.tests[first], second) && !slices.Contains(d.tests[first+"_test"], second) {
								bad = append(bad, where+" (no test of "+first+" is named "+second+")")
							}
						} else if !d.pkgs[first][second] {
							bad = append(bad, where+" ("+first+" declares no "+second+")")
						} else if third != "" && !d.members[second][third] {
							bad = append(bad, where+" ("+second+" has no "+third+")")
						}
					case d.members[first] != nil && third == "" && !foreign[base]: // Type.Member
						checked++
						if !d.members[first][second] {
							bad = append(bad, where+" ("+first+" has no "+second+")")
						}
					}
					continue
				}
				if foreign[base] {
					continue
				}
				if b := bare.FindStringSubmatch(span); b != nil {
					checked++
					if !d.any[b[1]] && !external[b[1]] {
						bad = append(bad, where+" (nothing in the module declares it)")
					}
				}
			}
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "docs name Go identifiers that do not exist:\n%s", strings.Join(bad, "\n"))
	require.Greater(t, checked, 100, "the docs' identifiers were found")
	t.Logf("%d identifiers checked", checked)
}
