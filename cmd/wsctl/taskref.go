package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/agentspace/agentspace/workspace"
)

// minTaskPrefix is the shortest task id prefix wsctl looks up, as git asks
// for at least four hex digits of a commit.
const minTaskPrefix = 4

// maxCandidates is how many matching tasks an ambiguous prefix lists.
const maxCandidates = 10

// resolveTaskID turns ref, a full task id or a unique prefix of one (like
// a short commit hash), into the task's id. No match is ErrNotFound (exit
// 5); an ambiguous prefix is a usage error (exit 2) listing the candidates.
func resolveTaskID(ctx context.Context, ws *workspace.Workspace, ref string) (string, error) {
	if _, err := uuid.Parse(ref); (err == nil && len(ref) == 36) || strings.Trim(strings.ToLower(ref), "0123456789abcdef-") != "" {
		// A whole id, or not an id at all: the workspace says which.
		return ref, nil
	}
	if len(ref) < minTaskPrefix {
		return "", usageErrorf("task id %q is too short: give the id or a prefix of at least %d characters", ref, minTaskPrefix)
	}
	prefix := strings.ToLower(ref)
	var matches []workspace.Task
	f := workspace.TaskFilter{Limit: 1000}
	for {
		page, err := ws.Tasks().List(ctx, f)
		if err != nil {
			return "", err
		}
		for _, t := range page.Tasks {
			if strings.HasPrefix(t.ID, prefix) {
				matches = append(matches, t)
			}
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("task %q: no task id starts with it: %w", ref, workspace.ErrNotFound)
	case 1:
		return matches[0].ID, nil
	}
	var b strings.Builder
	for i, t := range matches {
		if i == maxCandidates {
			fmt.Fprintf(&b, "; and %d more", len(matches)-maxCandidates)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %q", t.ID, t.Title)
	}
	return "", usageErrorf("task id prefix %q is ambiguous: %d tasks match: %s; give more characters", ref, len(matches), b.String())
}

// resolveTaskIDs resolves each of refs with resolveTaskID.
func resolveTaskIDs(ctx context.Context, ws *workspace.Workspace, refs []string) ([]string, error) {
	out := make([]string, len(refs))
	for i, r := range refs {
		id, err := resolveTaskID(ctx, ws, r)
		if err != nil {
			return nil, err
		}
		out[i] = id
	}
	return out, nil
}

// resolveOptionalTaskID resolves ref unless it is empty.
func resolveOptionalTaskID(ctx context.Context, ws *workspace.Workspace, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	return resolveTaskID(ctx, ws, ref)
}
