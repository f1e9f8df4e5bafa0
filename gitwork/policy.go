package gitwork

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/workspace"
)

// changedPath is one path an entry changes on the integration branch.
type changedPath struct {
	path    string
	deleted bool
}

// changedPaths lists what moving the integration branch from old to cand
// changes: exactly the entry's work as it would land, whatever the mode.
func (mg *Merger) changedPaths(ctx context.Context, old, cand string) ([]changedPath, error) {
	out, err := mg.m.git.run(ctx, "diff", "--name-status", "-z", "--no-renames", "--no-ext-diff", "--end-of-options", old, cand)
	if err != nil {
		return nil, err
	}
	fields := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	var paths []changedPath
	for i := 0; i+1 < len(fields); i += 2 {
		paths = append(paths, changedPath{path: fields[i+1], deleted: strings.HasPrefix(fields[i], "D")})
	}
	return paths, nil
}

// policyRefusals checks the entry's changed paths against the workspace's
// policy for the submitting agent, by the engine's rule for writing (or
// deleting) the artifact of that name. It returns the refused paths and a
// detail whose first line names each with its rule; none: it may land.
func (mg *Merger) policyRefusals(ctx context.Context, rec Worktree, paths []changedPath) ([]string, string, error) {
	c, err := mg.m.ws.WriteCheck(ctx)
	if err != nil || c.None() {
		return nil, "", err
	}
	who := workspace.Principal{Actor: rec.Agent}
	var refused, short, long []string
	for _, p := range paths {
		err := c.Check(who, p.path, p.deleted)
		var fe *workspace.ForbiddenError
		if !errors.As(err, &fe) {
			continue
		}
		refused = append(refused, p.path)
		short = append(short, fmt.Sprintf("%s (%s)", p.path, fe.Rule))
		long = append(long, fe.Error())
	}
	if len(refused) == 0 {
		return nil, "", nil
	}
	detail := fmt.Sprintf("the policy refuses %d changed paths of %s: %s\n%s",
		len(refused), orSomeone(rec.Agent), strings.Join(short, ", "), strings.Join(long, "\n"))
	return refused, detail, nil
}

// leaseRoles notes the merger actor's roles under the policy: the queue's
// lease is held by an owner that names this process as well as the actor
// (so two mergers never share it), and the policy knows only the actor.
func (mg *Merger) leaseRoles(ctx context.Context) error {
	if _, ok := wsconn.PrincipalFrom(ctx); ok {
		return nil // a server's token, or a caller's principal, decides
	}
	p, err := mg.m.ws.Policy(ctx)
	if err != nil || p == nil {
		return err
	}
	mg.roles = append([]string{}, p.RolesOf(mg.actor)...)
	return nil
}

// leaseCtx is ctx for the lease's calls: acting with the merger actor's
// roles when Run found a policy.
func (mg *Merger) leaseCtx(ctx context.Context) context.Context {
	if mg.roles == nil {
		return ctx
	}
	return workspace.WithPrincipal(ctx, workspace.Principal{Actor: mg.actor, Roles: mg.roles})
}
