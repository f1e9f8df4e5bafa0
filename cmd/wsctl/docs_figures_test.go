package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/mcp"
	pgmigrations "github.com/agentspace/agentspace/migrations/postgres"
	"github.com/agentspace/agentspace/workspace"
)

// The docs state figures about the code; these tests read each one where
// the docs state it and compare it with the code, so that a change to the
// code that makes a sentence untrue fails here, not in a reader's hands.

// readDoc returns a file of the repository, from its root.
func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

// stated finds re (one group) in a doc, flattening line breaks, and
// returns what the group matched; it fails if the sentence is gone.
func stated(t *testing.T, doc, rel string, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(strings.Join(strings.Fields(doc), " "))
	require.NotNil(t, m, "%s no longer states %s: update the doc and this test together", rel, re)
	return m[1]
}

func statedInt(t *testing.T, doc, rel, re string) int {
	t.Helper()
	s := stated(t, doc, rel, re)
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	require.NoError(t, err, "%s: %q", rel, s)
	return n
}

// words are the numbers the docs spell out.
var words = map[string]int{"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14}

func TestDocsStateTheSchemaAndArchiveVersions(t *testing.T) {
	cli := readDoc(t, "docs/cli.md")
	assert.Equal(t, int(sqlite.LatestVersion()), statedInt(t, cli, "docs/cli.md", `Current schemas: sqlite (\d+),`), "docs/cli.md: sqlite's schema version")
	assert.Equal(t, postgresLatest(t), statedInt(t, cli, "docs/cli.md", `Current schemas: sqlite \d+, postgres (\d+)`), "docs/cli.md: postgres's schema version")

	m, err := workspace.OpenMigrator(context.Background(), "json:"+filepath.Join(t.TempDir(), "ws"), workspace.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	assert.Equal(t, int(m.Latest()), statedInt(t, cli, "docs/cli.md", `Current schemas: sqlite \d+, postgres \d+ .*?, json (\d+);`), "docs/cli.md: json's format version")

	assert.Equal(t, workspace.ArchiveFormat, stated(t, cli, "docs/cli.md", "The archive is NDJSON, format `([a-z-]+)` version"))
	assert.Equal(t, workspace.ArchiveVersion, statedInt(t, cli, "docs/cli.md", "The archive is NDJSON, format `[a-z-]+` version (\\d+)"), "docs/cli.md: the archive version exports write")
}

// postgresLatest is the newest migration embedded for postgres.
func postgresLatest(t *testing.T) int {
	t.Helper()
	names, err := fs.Glob(pgmigrations.FS, "*.up.sql")
	require.NoError(t, err)
	latest := 0
	for _, n := range names {
		v, err := strconv.Atoi(strings.SplitN(n, "_", 2)[0])
		require.NoError(t, err, n)
		latest = max(latest, v)
	}
	return latest
}

// exitCodes are every code wsctl exits with, and what the docs call them.
var exitCodes = []int{exitOK, exitError, exitUsage, exitConflict, exitLocked, exitNotFound, exitNoTask, exitForbidden, exitNoStore, exitTampered, exitUnauthorized, exitPaused}

// sysExitCodes are the codes wsctl takes from sysexits.h, apart from the
// run of its own: 75, try again (EX_TEMPFAIL).
var sysExitCodes = []int{exitUnavailable}

func TestDocsListEveryExitCode(t *testing.T) {
	for i, c := range exitCodes {
		require.Equal(t, i, c, "exit codes are 0..%d with no gap", len(exitCodes)-1)
	}
	readme := stated(t, readDoc(t, "README.md"), "README.md", `Exit codes a script can branch on: (.*?)\. The full reference`)
	cli := readDoc(t, "docs/cli.md")
	var help strings.Builder
	run(context.Background(), []string{"--help"}, strings.NewReader(""), &help, &help, func(string) string { return "" })
	for _, c := range slices.Concat(exitCodes, sysExitCodes) {
		assert.Regexp(t, fmt.Sprintf("(^|, )%d [a-z`]", c), readme, "README.md's exit codes name %d", c)
		assert.Regexp(t, fmt.Sprintf(`(?m)^\| %d \| `, c), cli, "docs/cli.md's exit code table has %d", c)
		assert.Regexp(t, fmt.Sprintf("(?:codes: |, )%d [a-z`]", c), strings.Join(strings.Fields(help.String()), " "), "wsctl --help names exit %d", c)
	}
	n := len(exitCodes)
	assert.NotRegexp(t, fmt.Sprintf("(^|, )%d [a-z`]", n), readme, "README.md names an exit code %d that wsctl does not use", n)
	assert.NotRegexp(t, fmt.Sprintf(`(?m)^\| %d \| `, n), cli, "docs/cli.md names an exit code %d that wsctl does not use", n)
}

func TestDocsStateTheMCPToolsAndTheirSize(t *testing.T) {
	ctx := context.Background()
	dsn, ws := newMCPWorkspace(t)
	ms := mcp.NewServer(ws, mcp.Options{Actor: "docs"})
	t.Cleanup(func() { _ = ms.Close() })
	ct, st := sdk.NewInMemoryTransports()
	go func() { _ = ms.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "docs", Version: "0"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	kb := float64(len(b)) / 1024
	t.Logf("tools/list: %d tools, %d bytes (%.1f KB)", len(res.Tools), len(b), kb)

	doc := readDoc(t, "docs/mcp.md")
	assert.Equal(t, len(res.Tools), words[strings.ToLower(stated(t, doc, "docs/mcp.md", `(\w+) coarse tools`))], "docs/mcp.md: the number of tools")
	assertAbout(t, kb, stated(t, doc, "docs/mcp.md", "The whole `tools/list` answer is about \\*\\*([\\d.]+) KB\\*\\*"), "docs/mcp.md: the size of tools/list")
	readme := readDoc(t, "README.md")
	assert.Equal(t, len(res.Tools), words[stated(t, readme, "README.md", `The agent then has (\w+) tools`)], "README.md: the number of tools")
	assertAbout(t, kb, stated(t, readme, "README.md", "\\(`tools/list` is about ([\\d.]+) KB\\)"), "README.md: the size of tools/list")
	assert.Equal(t, len(res.Tools), statedInt(t, readme, "README.md", "`checked … (\\d+) tools`"), "README.md: what setup prints")

	// prime adds the worktree steps in a git repository: measure it in
	// a directory outside one and in a repository.
	plain, repo := t.TempDir(), t.TempDir()
	gitIn(t, "", "init", "-q", repo)
	for _, c := range []struct{ dir, re, what string }{
		{plain, `On an empty workspace it is about \*\*([\d.]+) KB\*\*`, "docs/mcp.md: the size of prime's briefing"},
		{repo, `On an empty workspace .*?, and about \*\*([\d.]+) KB\*\* in a git repository`, "docs/mcp.md: the size of prime's briefing in a git repository"},
	} {
		cmd := exec.Command(wsctlBinary(t), "--dsn", dsn, "prime", "--as", "claude")
		cmd.Dir, cmd.Env = c.dir, append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		out, err := cmd.Output()
		require.NoError(t, err)
		assertAbout(t, float64(len(out))/1024, stated(t, doc, "docs/mcp.md", c.re), c.what)
	}
}

// assertAbout checks a figure stated to one decimal ("about 8.1 KB"):
// the measured one rounds to it.
func assertAbout(t *testing.T, measured float64, stated, what string) {
	t.Helper()
	v, err := strconv.ParseFloat(stated, 64)
	require.NoError(t, err, what)
	decimals := 0
	if i := strings.IndexByte(stated, '.'); i >= 0 {
		decimals = len(stated) - i - 1
	}
	scale := math.Pow(10, float64(decimals))
	assert.Equal(t, v, math.Round(measured*scale)/scale, "%s: the docs say about %s, it is %.2f now", what, stated, measured)
}

// TestDocsStateTheConformanceCaseCount counts the suite's cases as
// conformance.Run runs them: the entries of its case lists and each
// t.Run it calls with a literal name that is not inside another such
// t.Run (those are sub-tests), plus Smoke.
func TestDocsStateTheConformanceCaseCount(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join("..", "..", "conformance", "*.go"))
	require.NoError(t, err)
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	lists := map[string]bool{"coreCases": true, "policyCases": true, "retentionCases": true, "messageCases": true}
	runners := map[string]bool{"runCore": true, "runConcurrency": true, "runReliability": true}
	cases := 0
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok || len(vs.Names) != 1 || !lists[vs.Names[0].Name] || len(vs.Values) != 1 {
						continue
					}
					if cl, ok := vs.Values[0].(*ast.CompositeLit); ok {
						cases += len(cl.Elts)
					}
				}
			case *ast.FuncDecl:
				if runners[d.Name.Name] {
					cases += literalRuns(d.Body)
				}
			}
		}
	}
	t.Logf("conformance: %d cases", cases)
	require.Greater(t, cases, 50)
	doc := readDoc(t, "docs/guarantees.md")
	assert.Equal(t, cases, statedInt(t, doc, "docs/guarantees.md", `Per backend it is (\d+) cases`), "docs/guarantees.md: the conformance case count")
}

// literalRuns counts the t.Run calls with a literal name under n, not
// looking inside them (their own t.Runs are sub-tests).
func literalRuns(n ast.Node) int {
	count := 0
	ast.Inspect(n, func(x ast.Node) bool {
		call, ok := x.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Run" || len(call.Args) != 2 {
			return true
		}
		if _, lit := call.Args[0].(*ast.BasicLit); !lit {
			return true // a name that varies (a mode, a child's role): look inside
		}
		count++
		return false
	})
	return count
}

func TestDocsStateTheJSONBackendsLimitOnce(t *testing.T) {
	readme := readDoc(t, "README.md")
	layout := readDoc(t, "docs/json-layout.md")
	want := stated(t, layout, "docs/json-layout.md", `comfortable to ~([\d,]+) artifacts`)
	norm := func(s string) string { return strings.NewReplacer(",", "", "k", "000").Replace(s) }
	assert.Equal(t, norm(want), norm(stated(t, readme, "README.md", "`git diff`; up to ~(\\w+) artifacts")), "README.md's backend table and docs/json-layout.md")
	assert.NotContains(t, strings.Join(strings.Fields(layout), " "), "tens of thousands of artifacts", "docs/json-layout.md gives one limit")
}
