package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/server"
)

// TestOpenAPIDocumentPassesRedoclyRecommended lints the document wsctl
// serve serves at /v1/openapi.json with the real Redocly CLI
// (testdata/redocly, installed with npm ci from its lockfile) and its
// recommended ruleset: no error allowed.
func TestOpenAPIDocumentPassesRedoclyRecommended(t *testing.T) {
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		testskip.Skip(t, "AGENTSPACE_TEST_REQUIRE_NODE", "SKIPPING the Redocly lint of the OpenAPI document: node or npm not on PATH")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "redocly"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := filepath.Join(dir, "node_modules", "@redocly", "cli", "bin", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		install.Dir = dir
		out, err := install.CombinedOutput()
		require.NoError(t, err, "npm ci: %s", out)
	}

	_, ws := newMCPWorkspace(t)
	srv, err := server.New(ws, server.Options{Version: "test"})
	require.NoError(t, err)
	doc, err := json.Marshal(srv.OpenAPI())
	require.NoError(t, err)
	spec := filepath.Join(t.TempDir(), "openapi.json")
	require.NoError(t, os.WriteFile(spec, doc, 0o600))

	cmd := exec.CommandContext(ctx, node, cli, "lint", "--config", filepath.Join(dir, "redocly.yaml"), spec)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("redocly lint:\n%s", out.String())
	require.NoError(t, err, "the OpenAPI document has errors under Redocly's recommended ruleset (above)")
}
