package clients_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheTypeScriptClientInstallsAsDocumented runs each block of
// docs/typescript.md's "Add it to your project" as printed, with real
// npm, offline, in a fresh project of its own, and then a program there
// that imports @agentspace/client and talks to a real server. npm takes
// nothing for it from the registry.
func TestTheTypeScriptClientInstallsAsDocumented(t *testing.T) {
	n, npm := node(t)
	dir := clientDir(t, n, npm)
	doc, err := os.ReadFile(repoDir(t, "docs", "typescript.md"))
	require.NoError(t, err)
	blocks := shBlocks(t, string(doc), "Add it to your project")
	require.Len(t, blocks, 2, "a directory dependency and a tarball")
	root, err := filepath.Abs(filepath.Join(dir, "..", ".."))
	require.NoError(t, err)
	s := serve(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	env := append(s.env("installed"), "npm_config_offline=true", "npm_config_audit=false", "npm_config_fund=false",
		"npm_config_update_notifier=false")
	for i, block := range blocks {
		project := filepath.Join(t.TempDir(), "your-project")
		require.NoError(t, os.Mkdir(project, 0o750))
		require.NoError(t, os.WriteFile(filepath.Join(project, "package.json"), []byte(`{"name":"your-project","version":"1.0.0","type":"module","private":true}`+"\n"), 0o600))
		run(t, project, env, "sh", "-ec", strings.ReplaceAll(block, "/path/to/agentspace", root))
		pkg, err := os.ReadFile(filepath.Join(project, "package.json"))
		require.NoError(t, err)
		assert.Regexp(t, `"@agentspace/client": ?"file:`, string(pkg), "block %d", i+1)
		require.NoError(t, os.WriteFile(filepath.Join(project, "main.mjs"), []byte(`import { Agentspace } from "@agentspace/client";
const ws = new Agentspace();
const a = await ws.artifacts.create({ name: "installed/`+string(rune('a'+i))+`.md", content: "hello" });
console.log("stored", a.name, "v" + a.version);
`), 0o600))
		out := run(t, project, env, n, "main.mjs")
		assert.Contains(t, out, "stored installed/"+string(rune('a'+i))+".md v1", "block %d", i+1)
	}
}

// shBlocks returns the ```sh blocks of a document's "## heading" section.
func shBlocks(t *testing.T, doc, heading string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+heading+"\n")
	require.True(t, ok, "no ## %s", heading)
	rest, _, _ = strings.Cut(rest, "\n## ")
	var out []string
	for {
		var ok bool
		_, rest, ok = strings.Cut(rest, "```sh\n")
		if !ok {
			return out
		}
		var block string
		block, rest, ok = strings.Cut(rest, "```\n")
		require.True(t, ok, "an open ```sh block")
		out = append(out, block)
	}
}
