package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentspace/agentspace/workspace"
)

// setupWorkspace makes sure the workspace the agent's server will find from
// dir exists: it creates it as 'wsctl init' would, unless noInit, and then
// refuses with the command to run. A store under .agentspace/ inside a git
// repository is added to the repository's .gitignore.
func (a *app) setupWorkspace(ctx context.Context, s setup, noInit bool) error {
	a.workDir = s.root
	res, err := a.resolve()
	if err != nil {
		return err
	}
	shown := workspace.RedactDSN(res.DSN)
	ws, err := a.open(ctx, false)
	switch {
	case err == nil:
		if err := ws.Close(); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "%-10s workspace %s\n", "unchanged", shown)
	case !errors.Is(err, workspace.ErrNoWorkspace):
		return err
	case noInit:
		return &cliError{code: exitNoStore, err: fmt.Errorf("no workspace at %s (%s)", shown, res.Source),
			hint: fmt.Sprintf("create it with 'wsctl init' in %s, then run setup again", s.root)}
	case s.dryRun:
		fmt.Fprintf(s.out, "%-10s workspace %s\n", "would have created", shown)
	default:
		if err := a.withNew(ctx, func(*workspace.Workspace) error { return nil }); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "%-10s workspace %s\n", "created", shown)
	}
	return ignoreStore(ctx, res.DSN, s)
}

// storeDirOf returns the .agentspace directory a sqlite: or json: DSN's
// file lies in, or "" for any other store.
func storeDirOf(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok || (!strings.EqualFold(scheme, "sqlite") && !strings.EqualFold(scheme, "json")) || strings.HasPrefix(rest, "//") {
		return ""
	}
	p, _, _ := strings.Cut(rest, "?")
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if filepath.Base(dir) == defaultStoreDir {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return ""
		}
	}
}

// ignoreLine is what setup and init add to a repository's .gitignore.
const ignoreLine = defaultStoreDir + "/"

// ignoreStore adds .agentspace/ to the .gitignore at the top of the git
// repository holding the store of dsn, unless a line there ignores it
// already, so that 'git add -A' never commits the workspace's files. Out of
// a repository (or without git) it does nothing.
func ignoreStore(ctx context.Context, dsn string, s setup) error {
	dir := storeDirOf(dsn)
	if dir == "" {
		return nil
	}
	out, err := exec.CommandContext(ctx, "git", "-C", filepath.Dir(dir), "rev-parse", "--show-toplevel").Output() // #nosec G204 -- git with fixed arguments and the store's own directory
	if err != nil {
		return nil // not in a repository, or no git: nothing to ignore
	}
	top := strings.TrimSpace(string(out))
	rel := ".gitignore"
	gs := setup{root: top, dryRun: s.dryRun, out: s.out}
	old, existed, err := gs.read(rel)
	if err != nil {
		return err
	}
	sub, err := filepath.Rel(top, dir)
	if err != nil {
		return nil
	}
	sub = filepath.ToSlash(sub)
	for _, line := range strings.Split(string(old), "\n") {
		switch strings.TrimSpace(line) {
		case defaultStoreDir, ignoreLine, "/" + defaultStoreDir, "/" + ignoreLine, sub, sub + "/", "/" + sub, "/" + sub + "/":
			return nil
		}
	}
	text := string(old)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	text += ignoreLine + "\n"
	if !s.dryRun {
		// .gitignore is read by everyone who clones: the usual mode.
		err := os.WriteFile(gs.path(rel), []byte(text), 0o644) // #nosec G306 -- a .gitignore, public by nature
		if err != nil {
			return err
		}
	}
	verb := "updated"
	if !existed {
		verb = "created"
	}
	if s.dryRun {
		verb = "would have " + verb
	}
	_, err = fmt.Fprintf(s.out, "%-10s %s (ignores %s)\n", verb, filepath.Join(top, rel), ignoreLine)
	return err
}

// checkAgent starts the MCP server as the agent will (command mcp, in
// dir, acting as actor), lists its tools and says what the agent will see.
// A server that does not start is an error that says why and what to do.
func checkAgent(ctx context.Context, s setup, command, actor string) error {
	path, err := exec.LookPath(command)
	if err != nil {
		return &cliError{code: exitError, err: fmt.Errorf("the agent starts %q, which is not on PATH", command),
			hint: "install wsctl with 'go install ./cmd/wsctl' in a clone of agentspace (or 'go install github.com/agentspace/agentspace/cmd/wsctl@latest') and put $(go env GOPATH)/bin on PATH, or pass --command /path/to/wsctl"}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "mcp") // #nosec G204 -- the agent's own command, as its configuration will start it
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), "AGENTSPACE_ACTOR="+actor)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "wsctl-setup", Version: readBuildInfo().Version}, nil)
	fail := func(err error) error {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return &cliError{code: exitError, err: fmt.Errorf("the agent's MCP server ('%s mcp' in %s) does not start: %s", command, s.root, msg),
			hint: "fix that, then run setup again ('wsctl config' in that directory shows which workspace it finds)"}
	}
	session, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		return fail(err)
	}
	tools, err := session.ListTools(ctx, nil)
	cerr := session.Close()
	if err != nil {
		return fail(err)
	}
	if cerr != nil && !errors.Is(cerr, fs.ErrClosed) {
		var ee *exec.ExitError
		if !errors.As(cerr, &ee) {
			return fail(cerr)
		}
	}
	_, err = fmt.Fprintf(s.out, "%-10s the agent's MCP server starts ('%s mcp' as %s): %d tools\n", "checked", command, actor, len(tools.Tools))
	return err
}
