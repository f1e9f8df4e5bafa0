package clients_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/wsctltest"
)

// TestAgentSDKPagesRunTheirExamples checks that the code blocks of
// docs/openai-agents.md and docs/adk.md are exactly the example files,
// runs those files against a server (the SDKs' runners with local models),
// and lists the records they wrote with wsctl on the same workspace.
func TestAgentSDKPagesRunTheirExamples(t *testing.T) {
	t.Parallel()
	n, npm := node(t)
	dir := clientDir(t, n, npm)
	s := serve(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	for _, c := range []struct {
		doc, heading, file, prefix, kind string
		want                             []string
	}{
		{"openai-agents.md", "With the OpenAI Agents SDK", "openai-agents.mjs", "openai-agents/", "session-items", []string{
			"question 1 of this conversation\n",
			"question 2 of this conversation\n",
			"4 items, listed by openai-agents/sessions/ticket-",
		}},
		{"adk.md", "With Google ADK", "adk.mjs", "adk/support/", "adk-events", []string{
			"support: question 1 of this session\n",
			"support: question 2 of this session\n",
			`4 events; state: {"last_answer":"question 2 of this session","user:name":"Ann"}`,
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			doc, err := os.ReadFile(repoDir(t, "docs", c.doc))
			require.NoError(t, err)
			body, err := os.ReadFile(filepath.Join(dir, "examples", c.file))
			require.NoError(t, err)
			assert.Equal(t, string(body), snippet(t, string(doc), c.heading), "docs/%s %q differs from clients/typescript/examples/%s", c.doc, c.heading, c.file)
			out := run(t, dir, s.env("docs"), n, filepath.Join("examples", c.file))
			for _, w := range c.want {
				assert.Contains(t, out, w, "examples/%s", c.file)
			}
			ls := run(t, dir, wsctltest.Env(), s.bin, "--dsn", s.dsn, "artifact", "ls", "--prefix", c.prefix)
			assert.Contains(t, ls, c.kind, "wsctl lists what examples/%s stored", c.file)
		})
	}
}
