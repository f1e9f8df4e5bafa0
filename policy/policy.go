package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Action is what an actor asks to do to an object.
type Action string

// The actions a policy rules on. The object of artifact actions is an
// artifact's name, of note actions a note's kind, of Lock a lock's
// resource, of task actions a task's ID (rules do not name tasks), and of
// admin actions empty.
const (
	ArtifactRead   Action = "artifact.read"
	ArtifactWrite  Action = "artifact.write" // create, update, roll back
	ArtifactDelete Action = "artifact.delete"
	NoteRead       Action = "note.read"
	NoteWrite      Action = "note.write" // put and delete
	TaskAdd        Action = "task.add"
	TaskClaim      Action = "task.claim"
	TaskFinish     Action = "task.finish" // complete or fail one's own task
	TaskOthers     Action = "task.others" // change a task that is not one's own
	Lock           Action = "lock"        // acquire, renew, release, force-release
	AdminPolicy    Action = "admin.policy"
	AdminCompact   Action = "admin.compact"
	AdminImport    Action = "admin.import"
	AdminTokens    Action = "admin.tokens"
	AdminExport    Action = "admin.export" // export (or archive) the whole workspace
	MessageSend    Action = "message.send" // the object is a recipient: an actor, or role:NAME
)

// Actions lists every action, in the order the docs give them.
var Actions = []Action{ArtifactRead, ArtifactWrite, ArtifactDelete, NoteRead, NoteWrite,
	TaskAdd, TaskClaim, TaskFinish, TaskOthers, Lock, AdminPolicy, AdminCompact, AdminImport, AdminTokens, AdminExport, MessageSend}

// AdminRole is the built-in role that holds every right. A policy may not
// define a role of that name.
const AdminRole = "admin"

// ruleKey is the policy-file key that grants each action: an error names it.
var ruleKey = map[Action]string{
	ArtifactRead: "artifacts_read", ArtifactWrite: "artifacts_write", ArtifactDelete: "artifacts_delete",
	NoteRead: "notes_read", NoteWrite: "notes_write",
	TaskAdd: "tasks", TaskClaim: "tasks", TaskFinish: "tasks", TaskOthers: "tasks",
	Lock: "locks", AdminPolicy: "admin", AdminCompact: "admin", AdminImport: "admin", AdminTokens: "admin", AdminExport: "admin",
	MessageSend: "messages",
}

// anyone is the messages rule of a role that has none: "**".
var anyone = Pattern{src: "**", segs: []string{"**"}, all: true}

// RuleKey returns the policy-file key whose entries grant a: the rule a
// refusal names.
func RuleKey(a Action) string { return ruleKey[a] }

// ParseAction returns the action named s (as in Actions), or an error
// listing them.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(Actions))
	for i, a := range Actions {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown action %q: one of %s", s, strings.Join(names, ", "))
}

// Policy is a compiled policy. It is immutable and safe for concurrent use.
type Policy struct {
	file        File
	defaultRole string
	roles       map[string]*role
	actors      map[string][]string // exact names
	actorGlobs  []actorGlob
}

type role struct {
	name string
	// patterns per pattern action; flags per task and admin action.
	patterns map[Action][]Pattern
	flags    map[Action]bool
}

type actorGlob struct {
	pat   Pattern
	roles []string
}

// Decision is the answer of Check: whether the action is allowed and,
// either way, what decided it, for the error or the explanation.
type Decision struct {
	Allowed bool     `json:"allowed"`
	Roles   []string `json:"roles"`             // the roles checked
	Role    string   `json:"role,omitempty"`    // the role that granted it
	Rule    string   `json:"rule"`              // the policy key consulted, e.g. "artifacts_write"
	Pattern string   `json:"pattern,omitempty"` // the pattern or right that matched
}

// Reason says in one line why the decision was made.
func (d Decision) Reason() string {
	if d.Allowed {
		if d.Role == AdminRole {
			return "granted by the built-in admin role"
		}
		return fmt.Sprintf("granted by roles.%s.%s %q", d.Role, d.Rule, d.Pattern)
	}
	if len(d.Roles) == 0 {
		return "the actor has no role (and the policy names no default_role)"
	}
	return fmt.Sprintf("no %s entry of roles %s grants it", d.Rule, strings.Join(d.Roles, ", "))
}

// File returns the policy as parsed. It shares its maps and slices with p:
// read it, do not modify it.
func (p *Policy) File() File { return p.file }

// RolesOf returns the roles of actor: those [actors] gives it by name, else
// those of every pattern that matches it, else the default role (none if
// the policy names none).
func (p *Policy) RolesOf(actor string) []string {
	if rs, ok := p.actors[actor]; ok {
		return rs
	}
	var out []string
	for _, g := range p.actorGlobs {
		if g.pat.Match(actor) {
			for _, r := range g.roles {
				if !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	if out != nil {
		return out
	}
	if p.defaultRole != "" {
		return []string{p.defaultRole}
	}
	return nil
}

// Check decides whether an actor holding roles may do action on object.
// A role the policy does not define grants nothing, except the built-in
// admin role, which grants everything.
func (p *Policy) Check(roles []string, action Action, object string) Decision {
	d := Decision{Roles: roles, Rule: ruleKey[action]}
	var parts []string
	for _, name := range roles {
		if name == AdminRole {
			d.Allowed, d.Role, d.Pattern = true, AdminRole, "*"
			return d
		}
		r := p.roles[name]
		if r == nil {
			continue
		}
		if r.flags[action] {
			d.Allowed, d.Role, d.Pattern = true, name, flagName(action)
			return d
		}
		for _, pat := range r.patterns[action] {
			if parts == nil {
				parts = strings.Split(object, "/")
			}
			if pat.matchParts(object, parts) {
				d.Allowed, d.Role, d.Pattern = true, name, pat.src
				return d
			}
		}
	}
	return d
}

// Allowed is Check for an actor, by its roles in the policy.
func (p *Policy) Allowed(actor string, action Action, object string) Decision {
	return p.Check(p.RolesOf(actor), action, object)
}

// DefinesRole reports whether the policy defines role name (the built-in
// admin role included).
func (p *Policy) DefinesRole(name string) bool {
	_, ok := p.roles[name]
	return ok || name == AdminRole
}

// NamesActor reports whether [actors] names actor exactly.
func (p *Policy) NamesActor(actor string) bool {
	_, ok := p.actors[actor]
	return ok
}

// NamedMembers returns the actors [actors] names exactly with role,
// sorted: the members of a role that can be listed (a pattern's cannot).
func (p *Policy) NamedMembers(role string) []string {
	var out []string
	for a, rs := range p.actors {
		if slices.Contains(rs, role) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// Rules counts the policy's rules: every pattern and right of every role.
func (p *Policy) Rules() int {
	n := 0
	for _, r := range p.roles {
		for _, ps := range r.patterns {
			n += len(ps)
		}
		n += len(r.flags)
	}
	return n
}

// flagName is the word of a task or admin right in the file.
func flagName(a Action) string {
	_, w, _ := strings.Cut(string(a), ".")
	return w
}
