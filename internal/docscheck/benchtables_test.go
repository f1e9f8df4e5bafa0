package docscheck_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/bench"
)

// benchDocs are the docs whose benchmark tables are generated: each must
// hold regions.
var benchDocs = []string{"docs/performance.md", "bench/README.md"}

// TestBenchTablesAreTheirRecordsRendering: every generated region of the
// repository's Markdown is exactly what package bench renders from the
// record its begin marker names, so a table edited by hand, or a renderer
// changed without the docs rendered again, fails here. Every record under
// docs/bench is one a region names: a regenerated doc leaves no stale
// record beside it.
func TestBenchTablesAreTheirRecordsRendering(t *testing.T) {
	root := filepath.Join("..", "..")
	named := map[string]bool{}
	withRegions := map[string]int{}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == "node_modules" || e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path) // #nosec G304 -- the repository's own docs
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		regions, err := bench.Regions(string(b))
		if !assert.NoError(t, err, rel) {
			return nil
		}
		for _, r := range regions {
			recPath := filepath.Join(filepath.Dir(path), filepath.FromSlash(r.Record))
			f, err := os.Open(recPath) // #nosec G304 -- a record a doc of the repository names
			if !assert.NoError(t, err, "%s: region %s names a record that is not there", rel, r.Name) {
				continue
			}
			rec, err := bench.ReadRecord(f)
			_ = f.Close()
			if !assert.NoError(t, err, "%s: region %s", rel, r.Name) {
				continue
			}
			abs, err := filepath.Abs(recPath)
			require.NoError(t, err)
			named[abs] = true
			want, err := bench.RenderRegion(r.Name, rec, r.Record)
			require.NoError(t, err)
			assert.Equal(t, want, r.Body,
				"%s: region %q is not what its record renders: do not edit it by hand; render it again with\n\tgo run ./cmd/wsctl bench docs --from %s --update %s",
				rel, r.Name, filepath.ToSlash(filepath.Join(filepath.Dir(rel), r.Record)), rel)
		}
		withRegions[rel] = len(regions)
		return nil
	})
	require.NoError(t, err)
	for _, d := range benchDocs {
		assert.Positive(t, withRegions[d], "%s has no generated regions", d)
	}
	records, err := filepath.Glob(filepath.Join(root, "docs", "bench", "*.json"))
	require.NoError(t, err)
	assert.NotEmpty(t, records, "docs/bench holds the record the tables are rendered from")
	for _, r := range records {
		abs, err := filepath.Abs(r)
		require.NoError(t, err)
		assert.True(t, named[abs], "%s is a record no doc renders a region from: remove it", r)
	}
}
