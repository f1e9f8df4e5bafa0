package wire

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// workspaceErrors reads package workspace's source (its non-test files):
// the message of each sentinel (an exported Err* var set by errors.New),
// by name, and the names of its exported error types (a type with an
// Error method).
func workspaceErrors(t *testing.T) (sentinels map[string]string, types []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "workspace", "*.go"))
	require.NoError(t, err)
	sentinels = map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, s := range d.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if !strings.HasPrefix(n.Name, "Err") || i >= len(vs.Values) {
							continue
						}
						call, ok := vs.Values[i].(*ast.CallExpr)
						if !ok || len(call.Args) != 1 {
							continue
						}
						lit, ok := call.Args[0].(*ast.BasicLit)
						require.True(t, ok, "%s is not errors.New of a literal", n.Name)
						msg, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						sentinels[n.Name] = msg
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || d.Name.Name != "Error" {
					continue
				}
				typ := d.Recv.List[0].Type
				if st, ok := typ.(*ast.StarExpr); ok {
					typ = st.X
				}
				if id, ok := typ.(*ast.Ident); ok && ast.IsExported(id.Name) {
					types = append(types, id.Name)
				}
			}
		}
	}
	return sentinels, types
}

// carriers are the workspace's error types that carry another error
// rather than being one of the table's: ProblemOf takes a batch's failing
// op's error out of a *BatchError and keeps its index.
var carriers = []string{"BatchError"}

// TestEveryWorkspaceErrorIsInTheTable reads the sentinels and the typed
// errors of package workspace from its source: each sentinel is one row's,
// each typed error (but the carriers) has a row's encode/decode pair, and
// the table has no typed error package workspace does not declare. An
// error added there fails this test until the table gives it a row.
func TestEveryWorkspaceErrorIsInTheTable(t *testing.T) {
	sentinels, types := workspaceErrors(t)
	require.NotEmpty(t, sentinels)
	require.NotEmpty(t, types)
	for name, msg := range sentinels {
		var rows []string
		for _, r := range errorTable {
			if r.sentinel != nil && r.sentinel.Error() == msg {
				rows = append(rows, r.code)
			}
		}
		assert.Len(t, rows, 1, "workspace.%s (%q) is the sentinel of one row of the error table, not %v", name, msg, rows)
	}
	var inTable []string
	for _, r := range errorTable {
		if r.typed != nil && !slices.Contains(inTable, r.typed.typ.Elem().Name()) {
			inTable = append(inTable, r.typed.typ.Elem().Name())
		}
	}
	assert.ElementsMatch(t, slices.DeleteFunc(types, func(n string) bool { return slices.Contains(carriers, n) }), inTable,
		"every typed error of package workspace has one encode/decode pair in the error table")
}

// TestEverySentinelOfTheWorkspaceHasACode: each sentinel of the table
// maps to a code of its own (not internal), its row's, with its row's
// status, and survives the wire: the decoded error matches it.
func TestEverySentinelOfTheWorkspaceHasACode(t *testing.T) {
	codes := map[string]string{}
	for _, r := range errorTable {
		if r.sentinel == nil {
			continue
		}
		e := r.sentinel
		p, ok := ProblemOf(fmt.Errorf("op: %w", e))
		require.True(t, ok, "%v has no code", e)
		assert.NotEqual(t, CodeInternal, p.Code, "%v", e)
		assert.Equal(t, r.code, p.Code, "%v", e)
		assert.Equal(t, r.status, p.Status, "%v", e)
		if other, dup := codes[p.Code]; dup {
			t.Errorf("%v and %s share code %s", e, other, p.Code)
		}
		codes[p.Code] = e.Error()
		b, err := json.Marshal(p)
		require.NoError(t, err)
		assert.ErrorIs(t, DecodeError(p.Status, b), e, "%v does not survive the wire", e)
	}
	assert.ErrorIs(t, workspace.ErrForbidden, ErrForbidden, "the HTTP layer's forbidden is the workspace's")
}

// TestEveryCodeHasARow: every code the package declares (the Code
// constants) has its row, with a status and an exit code, and a code
// outside the table is internal's status and wsctl's other error.
func TestEveryCodeHasARow(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "problem.go", nil, 0)
	require.NoError(t, err)
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if strings.HasPrefix(n.Name, "Code") {
					v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
					require.NoError(t, err)
					declared = append(declared, v)
				}
			}
		}
	}
	var inTable []string
	for _, r := range errorTable {
		inTable = append(inTable, r.code)
		assert.NotZero(t, r.status, r.code)
		assert.NotZero(t, r.exit, r.code)
		assert.Equal(t, r.exit, ExitCodeOf(r.code), r.code)
		assert.Equal(t, r.status, NewProblem(r.code, "").Status, r.code)
	}
	assert.ElementsMatch(t, declared, inTable)
	assert.Equal(t, ExitError, ExitCodeOf("no_such_code"))
	assert.Equal(t, 500, NewProblem("no_such_code", "").Status)
}
