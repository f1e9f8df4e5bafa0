package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
)

// The policy commands: show, apply and check the workspace's policy (the
// reserved artifact workspace.PolicyArtifact), list roles, and check a
// write ahead for an agent's hooks. They call the same policy package the
// engine enforces with.

func (a *app) policyCmd() *cobra.Command {
	return group("policy", "The workspace's roles and rules: show, apply FILE, check ACTOR ACTION OBJECT",
		a.policyShowCmd(),
		a.policyApplyCmd(),
		a.policyCheckCmd(),
	)
}

// loadPolicy reads and compiles the stored policy; nil, 0 when there is none.
func loadPolicy(ctx context.Context, ws *workspace.Workspace) (*policy.Policy, workspace.Artifact, error) {
	art, err := ws.Artifacts().Get(ctx, workspace.ByName(workspace.PolicyArtifact))
	if errors.Is(err, workspace.ErrNotFound) {
		return nil, workspace.Artifact{}, nil
	}
	if err != nil {
		return nil, workspace.Artifact{}, err
	}
	p, err := policy.Parse(art.Content)
	if err != nil {
		return nil, art, fmt.Errorf("the stored policy (version %d) is invalid: %w", art.Version, err)
	}
	return p, art, nil
}

func (a *app) policyShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the policy as stored (--json: its roles and actors, and its version)",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				p, art, err := loadPolicy(ctx, ws)
				if err != nil {
					return err
				}
				if a.jsonOut {
					out := struct {
						Version int64        `json:"version"`
						Policy  *policy.File `json:"policy"`
					}{Version: art.Version}
					if p != nil {
						f := p.File()
						out.Policy = &f
					}
					return a.printJSON(out)
				}
				if p == nil {
					_, err := fmt.Fprintln(a.stdout, "no policy: every actor may do everything ('wsctl policy apply FILE' sets one)")
					return err
				}
				fmt.Fprintf(a.stdout, "# %s version %d, by %s at %s\n", workspace.PolicyArtifact, art.Version, art.UpdatedBy, stamp(art.UpdatedAt))
				_, err = a.stdout.Write(art.Content)
				return err
			})
		}),
	}
}

func (a *app) policyApplyCmd() *cobra.Command {
	var wf writeFlags
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Validate a policy file (every error, with its line) and store it as the new version",
		Long: `apply reads FILE (- for stdin), checks all of it, and stores it as the
workspace's policy: a new version of ` + workspace.PolicyArtifact + `, so the change
is an event by its author and 'wsctl artifact rollback' undoes it. Changing a
policy needs the admin "policy" right (anyone may set the first one), and a
policy that would take that right from its author is refused.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			src, err := a.readInput(args[0])
			if err != nil {
				return err
			}
			if _, err := policy.Parse(src); err != nil {
				var pe *policy.Error
				if errors.As(err, &pe) {
					for _, p := range pe.Problems {
						fmt.Fprintf(a.stderr, "%s:%s\n", args[0], problemLine(p))
					}
					return &cliError{code: exitUsage, err: fmt.Errorf("%s: %d problem(s); nothing was stored", args[0], len(pe.Problems))}
				}
				return err
			}
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				w := wf.write(actor)
				ref := workspace.ByName(workspace.PolicyArtifact)
				art, err := ws.Artifacts().Update(ctx, w, ref, workspace.ArtifactChange{Content: src})
				if errors.Is(err, workspace.ErrNotFound) && w.IfVersion == 0 {
					art, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: workspace.PolicyArtifact, Kind: "policy", ContentType: "application/toml", Content: src})
				}
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(art)
				}
				_, err = fmt.Fprintf(a.stdout, "policy version %d applied\n", art.Version)
				return err
			})
		}),
	}
	wf.add(cmd)
	return cmd
}

// problemLine formats a problem as "LINE: key: message" for FILE:LINE output.
func problemLine(p policy.Problem) string {
	s := p.String()
	if p.Line > 0 {
		s = strings.TrimPrefix(s, fmt.Sprintf("line %d: ", p.Line))
		return fmt.Sprintf("%d: %s", p.Line, s)
	}
	return " " + s
}

func (a *app) policyCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check ACTOR ACTION [OBJECT]",
		Short: "Say whether ACTOR may do ACTION on OBJECT, and why (exit 0 or 7)",
		Long: `check answers from the stored policy, as the engine would: exit 0 and the
rule that grants it, or exit 7 and why not. ACTION is one of:
  ` + actionList() + `
OBJECT is an artifact name, a note kind or a lock resource (none for task
and admin actions).`,
		Args: cobra.RangeArgs(2, 3),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			act, err := policy.ParseAction(args[1])
			if err != nil {
				return usageErrorf("%v", err)
			}
			object := ""
			if len(args) == 3 {
				object = args[2]
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				p, _, err := loadPolicy(ctx, ws)
				if err != nil {
					return err
				}
				return a.explain(p, args[0], act, object)
			})
		}),
	}
}

// explain prints a decision and turns a refusal into exit 7.
func (a *app) explain(p *policy.Policy, actor string, act policy.Action, object string) error {
	d := policy.Decision{Allowed: true}
	reason := "no policy: everything is allowed"
	if p != nil {
		d = p.Allowed(actor, act, object)
		reason = d.Reason()
	}
	return a.explainDecision(d, reason, actor, act, object)
}

// explainDecision prints d with its reason and turns a refusal into exit 7.
func (a *app) explainDecision(d policy.Decision, reason, actor string, act policy.Action, object string) error {
	if a.jsonOut {
		if err := a.printJSON(struct {
			policy.Decision
			Reason string `json:"reason"`
		}{d, reason}); err != nil {
			return err
		}
	} else if d.Allowed {
		fmt.Fprintf(a.stdout, "allowed: %s\n", reason)
	}
	if !d.Allowed {
		obj := ""
		if object != "" {
			obj = fmt.Sprintf(" %q", object)
		}
		return &cliError{code: exitForbidden, err: fmt.Errorf("forbidden: %q may not %s%s: %s", actor, act, obj, reason)}
	}
	return nil
}

func actionList() string {
	names := make([]string, len(policy.Actions))
	for i, a := range policy.Actions {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

func (a *app) roleCmd() *cobra.Command {
	return group("role", "The policy's roles: ls, of ACTOR, grant ACTOR ROLE, revoke ACTOR ROLE",
		a.roleLsCmd(),
		a.roleOfCmd(),
		a.roleChangeCmd(true),
		a.roleChangeCmd(false),
	)
}

// roleChangeCmd is role grant (grant) or role revoke: a new version of the
// policy, written through the engine by workspace.GrantRole/RevokeRole.
func (a *app) roleChangeCmd(grant bool) *cobra.Command {
	var wf writeFlags
	verb, short := "grant", "Give ACTOR the role ROLE in the stored policy (a new version; needs the admin \"policy\" right)"
	if !grant {
		verb, short = "revoke", "Take the role ROLE from ACTOR in the stored policy (a new version; needs the admin \"policy\" right)"
	}
	cmd := &cobra.Command{
		Use:   verb + " ACTOR ROLE",
		Short: short,
		Long: short + `.

The actor's line in [actors] becomes exact: the roles it held (by name, by a
pattern, or by default_role) with ROLE added or taken away. The file is
edited in place and keeps its comments; a layout that cannot be edited so
(dotted keys, an inline table) is rendered anew, and the command says so.
The write is conditional on the version read, so a concurrent change is
never lost (it is re-read and the edit made again). Nothing is written when
the actor already holds (or lacks) the role.`,
		Args: cobra.ExactArgs(2),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			by, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				change := ws.GrantRole
				if !grant {
					change = ws.RevokeRole
				}
				rc, err := change(ctx, wf.write(by), args[0], args[1])
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(rc)
				}
				if rc.Canonical {
					fmt.Fprintf(a.stderr, "note: %s could not be edited in place; it was rendered anew, without its comments\n", workspace.PolicyArtifact)
				}
				roles := orDash(strings.Join(rc.Roles, " "))
				switch {
				case !rc.Changed && grant:
					_, err = fmt.Fprintf(a.stdout, "%s already holds %s (roles: %s); nothing written\n", rc.Actor, rc.Role, roles)
				case !rc.Changed:
					_, err = fmt.Fprintf(a.stdout, "%s does not hold %s (roles: %s); nothing written\n", rc.Actor, rc.Role, roles)
				default:
					_, err = fmt.Fprintf(a.stdout, "policy version %d: %s now holds %s\n", rc.Version, rc.Actor, roles)
				}
				return err
			})
		}),
	}
	wf.add(cmd)
	return cmd
}

func (a *app) roleLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the roles, their rules, and the actors that hold them",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				p, _, err := loadPolicy(ctx, ws)
				if err != nil {
					return err
				}
				if p == nil {
					if a.jsonOut {
						return a.printJSON(map[string]any{})
					}
					_, err := fmt.Fprintln(a.stdout, "no policy: every actor may do everything")
					return err
				}
				f := p.File()
				if a.jsonOut {
					return a.printJSON(f.Roles)
				}
				holders := map[string][]string{}
				for actor, roles := range f.Actors {
					for _, r := range roles {
						holders[r] = append(holders[r], actor)
					}
				}
				names := []string{policy.AdminRole}
				for name := range f.Roles {
					names = append(names, name)
				}
				slices.Sort(names[1:])
				tw := a.table()
				fmt.Fprintln(tw, "ROLE\tACTORS\tRULES")
				for _, name := range names {
					slices.Sort(holders[name])
					rules := "every right (built in)"
					if name != policy.AdminRole {
						rules = describeRules(f.Roles[name])
					}
					if name == f.DefaultRole {
						holders[name] = append(holders[name], "(default)")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", name, orDash(strings.Join(holders[name], ",")), rules)
				}
				return tw.Flush()
			})
		}),
	}
}

// describeRules shows a role's rules on one line.
func describeRules(r policy.Rules) string {
	var parts []string
	add := func(key string, v []string) {
		if v != nil {
			parts = append(parts, fmt.Sprintf("%s=[%s]", key, strings.Join(v, " ")))
		}
	}
	add("artifacts_read", r.ArtifactsRead)
	add("artifacts_write", r.ArtifactsWrite)
	add("artifacts_delete", r.ArtifactsDelete)
	add("notes_read", r.NotesRead)
	add("notes_write", r.NotesWrite)
	add("tasks", r.Tasks)
	add("locks", r.Locks)
	add("admin", r.Admin)
	if len(parts) == 0 {
		return "no rights"
	}
	return strings.Join(parts, " ")
}

func (a *app) roleOfCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "of ACTOR",
		Short: "Print the roles ACTOR holds under the policy",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				p, _, err := loadPolicy(ctx, ws)
				if err != nil {
					return err
				}
				roles := []string{}
				if p != nil {
					roles = append(roles, p.RolesOf(args[0])...)
				}
				if a.jsonOut {
					return a.printJSON(roles)
				}
				if p == nil {
					_, err := fmt.Fprintln(a.stdout, "no policy: every actor may do everything")
					return err
				}
				_, err = fmt.Fprintln(a.stdout, orDash(strings.Join(roles, " ")))
				return err
			})
		}),
	}
}

func (a *app) checkCmd() *cobra.Command {
	return group("check", "Check ahead whether the policy lets you act (for agents' hooks): write PATH",
		a.checkWriteCmd(),
	)
}

func (a *app) checkWriteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "write PATH",
		Short: "Exit 0 if you (--as) may write PATH under the policy, else exit 7 with the reason",
		Long: `check write lets an agent's own hooks (a pre-edit hook) refuse an edit before
it happens. PATH is a file path relative to the project's root (the
artifact name it would be promoted as); "./" and a path under the current
directory are made relative. The engine checks the same rule again when the
change reaches the workspace.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			name, err := artifactPath(args[0])
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				// The rule shadows and the merge queue apply, and the engine's.
				c, err := ws.WriteCheck(ctx)
				if err != nil {
					return err
				}
				who := workspace.Principal{Actor: actor}
				act, obj, d := c.Decide(who, name, false)
				reason := d.Reason()
				var fe *workspace.ForbiddenError
				if c.None() {
					reason = "no policy: everything is allowed"
				} else if errors.As(c.Check(who, name, false), &fe) {
					reason = fe.Reason
				}
				return a.explainDecision(d, reason, actor, act, obj)
			})
		}),
	}
}

// artifactPath turns a file path into the artifact name it stands for.
func artifactPath(path string) (string, error) {
	if filepath.IsAbs(path) {
		wd, err := filepath.Abs(".")
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(wd, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			return "", usageErrorf("%s is outside the current directory: give a path relative to the project's root", path)
		}
		path = rel
	}
	name := filepath.ToSlash(filepath.Clean(path))
	if err := workspace.ValidateName(name); err != nil {
		return "", usageErrorf("%v", err)
	}
	return name, nil
}
