// Package backend_test checks, over the source of every backend, that SQL
// text is never built from data: statements are literals and constants, and
// the only thing joined into them is an identifier made safe by
// pgx.Identifier{...}.Sanitize(). Values always travel as parameters.
package backend_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sqlRE spots a string that is SQL: an upper-case statement keyword.
var sqlRE = regexp.MustCompile(`\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|LISTEN|NOTIFY|TRUNCATE|GRANT|PRAGMA|WHERE|VALUES|SET)\b`)

// knownSafe are variables joined into SQL that hold no data, each with why.
var knownSafe = map[string]string{
	"sqlite/artifacts.go col": "labelClauses' column: its callers pass only the literals v.labels and t.labels",
}

// TestSQLIsNeverBuiltFromData fails on fmt.Sprintf (or any Sprint) whose
// format is SQL, and on + or strings.Builder joining SQL with anything that
// is not a literal, a constant or a sanitised identifier.
func TestSQLIsNeverBuiltFromData(t *testing.T) {
	var files []string
	for _, dir := range []string{".", "../migrations", "../workspace"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "pgtest" {
				return filepath.SkipDir // test support: creates roles for tests, ships in no program
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				files = append(files, p)
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, len(files), 20, "the backends' sources are found")

	fset := token.NewFileSet()
	var problems []string
	// A package's constants are constant in every file of it (a query in
	// one file may name columns declared in another).
	parsed := map[string]*ast.File{}
	consts := map[string]map[string]bool{} // by directory
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		parsed[name] = f
		dir := filepath.Dir(name)
		if consts[dir] == nil {
			consts[dir] = map[string]bool{}
		}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					for _, n := range s.(*ast.ValueSpec).Names {
						consts[dir][n.Name] = true
					}
				}
			}
		}
	}
	for _, name := range files {
		f, consts := parsed[name], consts[filepath.Dir(name)]
		report := func(n ast.Node, what string) {
			problems = append(problems, fset.Position(n.Pos()).String()+": "+what)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch e := n.(type) {
			case *ast.CallExpr:
				if sel, ok := e.Fun.(*ast.SelectorExpr); ok && len(e.Args) > 0 {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Sprint") && isSQL(e.Args[0]) {
						report(e, "fmt."+sel.Sel.Name+" builds SQL")
					}
				}
			case *ast.BinaryExpr:
				if e.Op == token.ADD && (isSQL(e.X) || isSQL(e.Y)) {
					for _, part := range flatten(e) {
						if id, ok := part.(*ast.Ident); ok && knownSafe[filepath.ToSlash(name)+" "+id.Name] != "" {
							continue
						}
						if !safePart(part, consts) {
							report(part, "SQL joined with data: "+types(part))
						}
					}
					return false
				}
			}
			return true
		})
	}
	assert.Empty(t, problems, "SQL text must be constant; pass values as $n / ? parameters and sanitise identifiers")
}

// isSQL reports whether e is a string literal that reads as SQL.
func isSQL(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, err := strconv.Unquote(lit.Value)
	return err == nil && sqlRE.MatchString(s)
}

func flatten(e ast.Expr) []ast.Expr {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
		return append(flatten(b.X), flatten(b.Y)...)
	}
	if p, ok := e.(*ast.ParenExpr); ok {
		return flatten(p.X)
	}
	return []ast.Expr{e}
}

// safePart: a literal, a constant of the file, or X.Sanitize() on a pgx.Identifier.
func safePart(e ast.Expr, consts map[string]bool) bool {
	switch v := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return consts[v.Name]
	case *ast.CallExpr:
		sel, ok := v.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Sanitize" {
			return false
		}
		cl, ok := sel.X.(*ast.CompositeLit)
		if !ok {
			return false
		}
		typ, ok := cl.Type.(*ast.SelectorExpr)
		return ok && typ.Sel.Name == "Identifier"
	}
	return false
}

func types(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.Ident:
		return "variable " + v.Name
	case *ast.CallExpr:
		return "a call"
	case *ast.SelectorExpr:
		return "field " + v.Sel.Name
	}
	return "an expression"
}
