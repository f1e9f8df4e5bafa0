package layering_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// floorRow is one row of the table in docs/architecture.md.
type floorRow struct {
	floor    int
	patterns []string // module-relative: "server", "backend/..."
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readFloors parses the rows between the floors markers of
// docs/architecture.md: "| floor | `pkg`, `pkg/...` | what |".
func readFloors(t *testing.T, root string) []floorRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md")) // #nosec G304 -- the repository's own doc
	require.NoError(t, err)
	var rows []floorRow
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "<!-- floors:begin"):
			in = true
			continue
		case strings.HasPrefix(line, "<!-- floors:end"):
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.GreaterOrEqual(t, len(cells), 2, "floors row %q", line)
		n, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		if err != nil {
			continue // the header and its rule
		}
		row := floorRow{floor: n}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			row.patterns = append(row.patterns, m[1])
		}
		require.NotEmpty(t, row.patterns, "floor %d names no package", n)
		rows = append(rows, row)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rows, "docs/architecture.md has no floors table between its markers")
	return rows
}

// floorOf is the floor of a module-relative package path: that of the
// longest pattern that matches it.
func floorOf(rows []floorRow, rel string) (int, bool) {
	best, floor := -1, 0
	for _, r := range rows {
		for _, p := range r.patterns {
			match := p == rel
			if base, ok := strings.CutSuffix(p, "/..."); ok {
				match = rel == base || strings.HasPrefix(rel, base+"/")
			}
			if match && len(p) > best {
				best, floor = len(p), r.floor
			}
		}
	}
	return floor, best >= 0
}

type listed struct {
	ImportPath string
	Imports    []string
	Module     *struct{ Path string }
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) (dir, path string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Path}}").Output()
	require.NoError(t, err)
	dir, path, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	require.True(t, ok, "go list -m: %q", out)
	return dir, path
}

func goList(t *testing.T, root string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...) // #nosec G204 -- fixed arguments of this test
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v: %s", args, stderr.String())
	return out
}

// TestEveryPackageImportsOnlyBelowItsFloor reads the floors from
// docs/architecture.md and the imports of every package of the module
// (tests aside) from go list: a package with no floor, or an import of a
// package on its own floor or above, fails.
func TestEveryPackageImportsOnlyBelowItsFloor(t *testing.T) {
	root, mod := moduleRoot(t)
	rows := readFloors(t, root)
	dec := json.NewDecoder(bytes.NewReader(goList(t, root, "-json=ImportPath,Imports,Module", "./...")))
	var n int
	for dec.More() {
		var p listed
		require.NoError(t, dec.Decode(&p))
		rel, ok := relative(mod, p.ImportPath)
		if !ok {
			continue
		}
		n++
		floor, ok := floorOf(rows, rel)
		if !assert.True(t, ok, "%s has no floor in docs/architecture.md's table", rel) {
			continue
		}
		for _, imp := range p.Imports {
			irel, ours := relative(mod, imp)
			if !ours {
				continue
			}
			ifloor, ok := floorOf(rows, irel)
			if !assert.True(t, ok, "%s (imported by %s) has no floor", irel, rel) {
				continue
			}
			assert.Less(t, ifloor, floor, "%s (floor %d) imports %s (floor %d): a package imports only floors below its own", rel, floor, irel, ifloor)
		}
	}
	assert.Greater(t, n, 10, "go list found the module's packages")
}

func relative(mod, importPath string) (string, bool) {
	if importPath == mod {
		return ".", true
	}
	return strings.CutPrefix(importPath, mod+"/")
}

// deps lists the packages a build of args links.
func deps(t *testing.T, root string, args ...string) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, l := range strings.Fields(string(goList(t, root, append([]string{"-deps"}, args...)...))) {
		set[l] = true
	}
	return set
}

// forbidden returns the members of set that start with any of prefixes.
func forbidden(set map[string]bool, prefixes ...string) []string {
	var bad []string
	for p := range set {
		for _, f := range prefixes {
			if p == f || strings.HasPrefix(p, f+"/") {
				bad = append(bad, p)
				break
			}
		}
	}
	return bad
}

// TestRemoteLinksNoServer: a program that talks to a server through
// backend/remote links neither the server nor what the server is built
// with (the HTTP framework, the MCP SDK, metrics, markdown), nor the
// engine: the remote backend registers with the contract alone.
func TestRemoteLinksNoServer(t *testing.T) {
	root, mod := moduleRoot(t)
	set := deps(t, root, "./backend/remote")
	require.True(t, set[mod+"/wire"], "backend/remote links the wire package")
	require.True(t, set[mod+"/workspace/driver"], "backend/remote links the backend contract")
	assert.Empty(t, forbidden(set, mod+"/server", mod+"/mcp", mod+"/gitwork", mod+"/bench",
		mod+"/workspace/engine",
		"github.com/danielgtaylor/huma", "github.com/modelcontextprotocol/go-sdk",
		"github.com/prometheus", "github.com/yuin/goldmark"))
}

// TestTheCommandLinksNoMetricsLibrary: wsctl links neither the Prometheus
// client library nor protobuf nor expvar. Their initialisers (a Go and a
// process collector, descriptors, protobuf's registry) ran at the start of
// every command, served or not: about 1.5 ms of a 10 ms call. The server
// writes its metrics with internal/promtext.
func TestTheCommandLinksNoMetricsLibrary(t *testing.T) {
	root, mod := moduleRoot(t)
	set := deps(t, root, "./cmd/wsctl")
	require.True(t, set[mod+"/internal/promtext"], "wsctl serves /metrics through internal/promtext")
	assert.Empty(t, forbidden(set, "github.com/prometheus", "google.golang.org/protobuf", "expvar"))
}

// maxContractLines bounds the backend contract's code (workspace/driver,
// tests aside, comments included), as small as the anchors' interface
// packages are: database/sql/driver about 855 lines, gocloud's
// docstore/driver about 1,576, River's riverdriver about 971.
const maxContractLines = 1000

// TestTheContractIsApartFromTheEngine: the backend contract links neither
// the engine nor database/sql nor any backend, and stays small; what the
// SQL backends share lives under backend/internal.
func TestTheContractIsApartFromTheEngine(t *testing.T) {
	root, mod := moduleRoot(t)
	set := deps(t, root, "./workspace/driver")
	assert.Empty(t, forbidden(set, mod+"/workspace/engine", mod+"/backend", "database/sql"),
		"workspace/driver links neither the engine nor database/sql nor a backend")

	files, err := filepath.Glob(filepath.Join(root, "workspace", "driver", "*.go"))
	require.NoError(t, err)
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f) // #nosec G304 -- the repository's own source
		require.NoError(t, err)
		lines += bytes.Count(b, []byte("\n"))
	}
	assert.Positive(t, lines)
	assert.LessOrEqual(t, lines, maxContractLines, "workspace/driver's code: the contract, not the engine")
}

// TestBackendTestBinariesLinkNoBench: the stores' test binaries link
// neither the benchmarks nor a face; the remote backend's links the server
// it tests against, but not the benchmarks.
func TestBackendTestBinariesLinkNoBench(t *testing.T) {
	root, mod := moduleRoot(t)
	for _, b := range []string{"sqlite", "json", "postgres"} {
		t.Run(b, func(t *testing.T) {
			set := deps(t, root, "-test", "./backend/"+b)
			require.True(t, set[mod+"/backend/"+b], "go list -test -deps lists the backend itself")
			assert.Empty(t, forbidden(set, mod+"/bench", mod+"/server", mod+"/mcp", mod+"/gitwork", "github.com/danielgtaylor/huma"))
		})
	}
	t.Run("remote", func(t *testing.T) {
		set := deps(t, root, "-test", "./backend/remote")
		assert.Empty(t, forbidden(set, mod+"/bench", mod+"/mcp", mod+"/gitwork"), "backend/remote's tests")
	})
}

// maxUserDocLines bounds `go doc -short ./workspace`: the user's package
// lists what users call, and nothing an implementer, a face or a codec
// needs (those live in workspace/driver, workspace/engine, workspace/touch,
// wire and internal/...). It lists five lines of constants and errors (the
// subject kinds share the event types' block; the six task statuses are
// one block, one line under TaskStatus), five functions (ArtifactResource,
// AsActor, RedactDSN, ValidateName, WithPrincipal), and the types with
// their constructors; messages and pauses (their records, inbox, ops and
// error) are eleven of its lines, and an import's report one.
const maxUserDocLines = 100

// TestTheUserPackageStaysSmall counts the lines of `go doc -short
// ./workspace` and looks for the names that left it for the SPI, the
// engine, the faces or internal/..., so that they do not come back.
func TestTheUserPackageStaysSmall(t *testing.T) {
	root, _ := moduleRoot(t)
	cmd := exec.Command("go", "doc", "-short", "./workspace") // #nosec G204 -- fixed arguments of this test
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	assert.LessOrEqual(t, len(lines), maxUserDocLines, "go doc -short ./workspace:\n%s", out)
	for _, line := range lines {
		for _, gone := range []string{"type Backend ", "func Register(", "type Config ", "func ParseDSN(", "func NewSubscription(", "func DecodeContent(", "type Toucher ", "func Reserve(", "type Collector ", "func GC(",
			"func TaskResource(", "func ContentTypeFor(", "func ValidateArea(", "func RedactError(", "func PrincipalFrom("} {
			assert.NotContains(t, line, gone, "belongs to the SPI, the engine, a face or internal/..., not the user's package")
		}
	}
}

// readImports parses the rows between the imports markers of
// docs/architecture.md: "| `pkg` | `imp`, `imp` |".
func readImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md")) // #nosec G304 -- the repository's own doc
	require.NoError(t, err)
	rows := map[string][]string{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "<!-- imports:begin"):
			in = true
			continue
		case strings.HasPrefix(line, "<!-- imports:end"):
			in = false
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cells, 2, "imports row %q", line)
		pkg := backticked.FindStringSubmatch(cells[0])
		if pkg == nil {
			continue // the header and its rule
		}
		imps := []string{}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			imps = append(imps, m[1])
		}
		rows[pkg[1]] = imps
	}
	require.NotEmpty(t, rows, "docs/architecture.md has no imports table between its markers")
	return rows
}

// TestTheHouseDrawsTheImportsThereAre compares the imports table beside
// docs/architecture.md's drawing with what go list says each package
// imports of the module (internal/ and migrations/ aside, tests aside):
// a drawing that shows an import that is not there, or hides one, fails.
func TestTheHouseDrawsTheImportsThereAre(t *testing.T) {
	root, mod := moduleRoot(t)
	drawn := readImports(t, root)
	var pkgs []string
	for p := range drawn {
		pkgs = append(pkgs, "./"+p)
	}
	dec := json.NewDecoder(bytes.NewReader(goList(t, root, append([]string{"-json=ImportPath,Imports"}, pkgs...)...)))
	seen := 0
	for dec.More() {
		var p listed
		require.NoError(t, dec.Decode(&p))
		rel, _ := relative(mod, p.ImportPath)
		got := []string{}
		for _, imp := range p.Imports {
			irel, ours := relative(mod, imp)
			if ours && !strings.HasPrefix(irel, "internal/") && !strings.HasPrefix(irel, "migrations/") {
				got = append(got, irel)
			}
		}
		assert.ElementsMatch(t, drawn[rel], got, "docs/architecture.md's imports row of %s", rel)
		seen++
	}
	assert.Equal(t, len(drawn), seen, "every row of the imports table is a package")
}
