package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultDSN is the store used when nothing else is configured.
const DefaultDSN = "sqlite:.agentspace/workspace.db"

var (
	registryMu sync.RWMutex
	registry   = map[string]Backend{}
)

// importHints names the import that registers each of our schemes.
var importHints = map[string]string{
	"sqlite":     "github.com/agentspace/agentspace/backend/sqlite",
	"json":       "github.com/agentspace/agentspace/backend/json",
	"postgres":   "github.com/agentspace/agentspace/backend/postgres",
	"postgresql": "github.com/agentspace/agentspace/backend/postgres",
}

// Backend opens the workspaces of the schemes it is registered under.
// A backend that stores the workspace itself implements driver.Driver and
// registers it with driver.Register, which makes a Backend of it; one that
// reaches a workspace elsewhere (a client of a server) implements Backend.
type Backend interface {
	// Open returns a handle on the workspace cfg names. opts has its
	// defaults set; with opts.MustExist, Open creates nothing and fails
	// with a *NoWorkspaceError where there is no workspace.
	Open(ctx context.Context, cfg Config, opts Options) (*Workspace, error)
	// Params lists the backend's own ws_ DSN parameters; any other ws_
	// parameter not known to this package is an error.
	Params() []string
}

// MigratingBackend is an optional Backend capability, used by
// OpenMigrator. Of opts, only MustExist applies.
type MigratingBackend interface {
	Backend
	OpenMigrator(ctx context.Context, cfg Config, opts Options) (Migrator, error)
}

// Register makes a backend available under scheme. It is meant to be
// called from a backend's init (through driver.Register for a
// driver.Driver); registering a scheme twice, or a nil backend, panics.
func Register(scheme string, b Backend) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if b == nil {
		panic("workspace: Register backend is nil")
	}
	if _, dup := registry[scheme]; dup {
		panic("workspace: Register called twice for scheme " + scheme)
	}
	registry[scheme] = b
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// shared ws_ parameters, understood by this package for every backend.
const (
	paramPoll            = "ws_poll"
	paramAutoMigrate     = "ws_automigrate"
	paramMaxArtifactSize = "ws_max_artifact_size"
	paramIdempotencyTTL  = "ws_idempotency_ttl"
	paramPrivate         = "ws_private"
	paramWaitForGroup    = "ws_group_wait"
	paramPolicyRecheck   = "ws_policy_recheck"
)

// Options tune a handle. The zero value means the defaults.
type Options struct {
	// MaxArtifactSize limits one artifact version's content (default 32 MiB).
	MaxArtifactSize int64
	// IdempotencyTTL is how long idempotency keys are kept (default 24h).
	IdempotencyTTL time.Duration
	// PollInterval is how often the store is looked at for other processes'
	// writes when it cannot notify (default 50ms).
	PollInterval time.Duration
	// Logger receives diagnostics (default: slog.Default()).
	Logger *slog.Logger
	// GroupWait bounds how long the committer, about to start a group
	// commit, waits for writers it expects: as many as the last
	// transaction saw, whose writers it has just answered (default 250µs;
	// never more than an eighth of the last transaction's time; negative:
	// never wait; ws_group_wait in the DSN, 0 for never). Waiting lets
	// writers in a loop share one commit instead of alternating between
	// two; a single writer never waits.
	GroupWait time.Duration
	// Private gives the handle a store of its own (its own connections, its
	// own writer queue and event hub) rather than sharing one with the
	// process's other handles opened on the same DSN with the same options
	// (ws_private=true in the DSN). Shared handles group their writes into
	// common commits; a private one behaves as a handle in another process
	// would. Handles from a backend's own constructor are always private.
	Private bool
	// MustExist makes Open and OpenMigrator open only a workspace that was
	// created before (by an Open without it, or a migration), and fail with
	// a *NoWorkspaceError, creating nothing, where there is none: a read
	// on a mistyped path or schema then says so instead of leaving an empty
	// store behind. The backend must be able to tell (a driver.Driver
	// does so as a driver.Prober).
	MustExist bool
	// PolicyRecheck bounds how stale the workspace's policy may be when an
	// operation is checked against it: the handle reads the policy's head
	// again when its copy was confirmed longer ago than this (default
	// 100ms; negative: read it for every operation; ws_policy_recheck in
	// the DSN, 0 for every operation). A handle's own policy change binds
	// at once on that handle whatever the setting. A longer bound saves a
	// read on a handle whose operations come further apart than that.
	PolicyRecheck time.Duration
}

// WithDefaults returns o with every zero field set to its default, as
// every handle applies them.
func (o Options) WithDefaults() Options {
	if o.MaxArtifactSize <= 0 {
		o.MaxArtifactSize = DefaultMaxArtifactSize
	}
	if o.IdempotencyTTL <= 0 {
		o.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.GroupWait == 0 {
		o.GroupWait = DefaultGroupWait
	}
	if o.PolicyRecheck == 0 {
		o.PolicyRecheck = DefaultPolicyRecheck
	}
	return o
}

// ParsedDSN is a DSN taken apart: the backend and its Config, and the handle's Options.
type ParsedDSN struct {
	Backend Backend
	Config  Config
	Options Options
}

var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*$`)

// ParseDSN splits dsn into its scheme, its ws_ parameters and the rest, and
// finds the registered backend. Errors never contain a password.
func ParseDSN(dsn string) (ParsedDSN, error) {
	var p ParsedDSN
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok || !schemeRE.MatchString(scheme) {
		return p, invalid("dsn", "%q has no scheme: want one of %s (e.g. %s)", RedactDSN(dsn), schemeList(), DefaultDSN)
	}
	scheme = strings.ToLower(scheme)
	registryMu.RLock()
	d := registry[scheme]
	registryMu.RUnlock()
	if d == nil {
		msg := fmt.Sprintf("unknown scheme %q: registered schemes are %s", scheme, schemeList())
		if imp, ok := importHints[scheme]; ok {
			msg += fmt.Sprintf("; import _ %q to register it", imp)
		}
		return p, invalid("dsn", "%s", msg)
	}

	var (
		query string
		base  string
	)
	isURL := strings.HasPrefix(rest, "//")
	if isURL {
		u, err := url.Parse(dsn)
		if err != nil {
			return p, invalid("dsn", "%s is not a valid URL", RedactDSN(dsn))
		}
		query = u.RawQuery
		u.RawQuery = ""
		base = u.String()
	} else {
		base, query, _ = strings.Cut(rest, "?")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return p, invalid("dsn", "bad query in %s: %v", RedactDSN(dsn), err)
	}

	own := map[string]bool{}
	for _, name := range d.Params() {
		own[name] = true
	}
	cfg := Config{Scheme: scheme, Params: map[string]string{}, PollInterval: DefaultPollInterval}
	var opts Options
	kept := url.Values{}
	for key, vals := range values {
		if !strings.HasPrefix(key, "ws_") {
			kept[key] = vals
			continue
		}
		v := vals[len(vals)-1]
		switch {
		case key == paramPoll:
			dur, err := time.ParseDuration(v)
			if err != nil || dur < time.Millisecond || dur > time.Minute {
				return p, invalid("dsn", "%s=%q: want a duration between 1ms and 1m", key, v)
			}
			cfg.PollInterval, opts.PollInterval = dur, dur
		case key == paramAutoMigrate:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return p, invalid("dsn", "%s=%q: want true or false", key, v)
			}
			cfg.AutoMigrate = b
		case key == paramMaxArtifactSize:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || n > 1<<30 {
				return p, invalid("dsn", "%s=%q: want a byte count between 1 and 1073741824", key, v)
			}
			opts.MaxArtifactSize = n
		case key == paramIdempotencyTTL:
			dur, err := time.ParseDuration(v)
			if err != nil || dur < time.Second {
				return p, invalid("dsn", "%s=%q: want a duration of at least 1s", key, v)
			}
			opts.IdempotencyTTL = dur
		case key == paramWaitForGroup:
			dur, err := time.ParseDuration(v)
			if err != nil || dur < 0 || dur > 10*time.Millisecond {
				return p, invalid("dsn", "%s=%q: want a duration between 0 (never wait) and 10ms", key, v)
			}
			opts.GroupWait = dur
			if dur == 0 {
				opts.GroupWait = -1
			}
		case key == paramPolicyRecheck:
			dur, err := time.ParseDuration(v)
			if err != nil || dur < 0 || dur > time.Hour {
				return p, invalid("dsn", "%s=%q: want a duration between 0 (every operation) and 1h", key, v)
			}
			opts.PolicyRecheck = dur
			if dur == 0 {
				opts.PolicyRecheck = -1
			}
		case key == paramPrivate:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return p, invalid("dsn", "%s=%q: want true or false", key, v)
			}
			opts.Private = b
		case own[key]:
			cfg.Params[key] = v
		default:
			known := []string{paramAutoMigrate, paramWaitForGroup, paramIdempotencyTTL, paramMaxArtifactSize, paramPoll, paramPrivate, paramPolicyRecheck}
			known = append(known, d.Params()...)
			sort.Strings(known)
			return p, invalid("dsn", "unknown parameter %s for scheme %q (known: %s)", key, scheme, strings.Join(known, ", "))
		}
	}
	enc := kept.Encode()
	if isURL {
		cfg.DSN = base
		if enc != "" {
			cfg.DSN += "?" + enc
		}
		cfg.Target = cfg.DSN
	} else {
		cfg.Target = base
		if enc != "" {
			cfg.Target += "?" + enc
		}
		cfg.DSN = scheme + ":" + cfg.Target
	}
	p.Backend, p.Config, p.Options = d, cfg, opts
	return p, nil
}

func schemeList() string {
	s := Schemes()
	if len(s) == 0 {
		return "(none: import a backend, e.g. _ \"github.com/agentspace/agentspace/backend/sqlite\")"
	}
	return strings.Join(s, ", ")
}

// Open opens the workspace dsn names, e.g. "sqlite:.agentspace/workspace.db",
// "json:./ws", "postgres://user@host/db?ws_schema=team1". The backend for the
// scheme must be imported (for its init). opts, if given, override the
// DSN's ws_ parameters field by field.
//
// Handles opened on one DSN with the same options in one process share
// their store, so that their writers share commits; each handle still
// closes on its own. Options.Private opts out.
func Open(ctx context.Context, dsn string, opts ...Options) (*Workspace, error) {
	p, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	o := p.Options
	for _, x := range opts {
		o = mergeOptions(o, x)
	}
	o = o.WithDefaults()
	p.Config.Logger = o.Logger
	p.Config.PollInterval = o.PollInterval
	ws, err := p.Backend.Open(ctx, p.Config, o)
	if err != nil {
		return nil, redactErr(fmt.Errorf("open %s: %w", RedactDSN(dsn), err), dsn)
	}
	return ws, nil
}

// OpenMigrator opens dsn's store for schema migration only: no schema
// check. Of opts, only MustExist applies: without it, a store that does not
// exist is created empty (schema version 0).
func OpenMigrator(ctx context.Context, dsn string, opts ...Options) (Migrator, error) {
	p, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	mb, ok := p.Backend.(MigratingBackend)
	if !ok {
		return nil, fmt.Errorf("scheme %q does not support migrations", p.Config.Scheme)
	}
	p.Config.Logger = slog.Default()
	o := p.Options
	for _, x := range opts {
		o.MustExist = o.MustExist || x.MustExist
	}
	m, err := mb.OpenMigrator(ctx, p.Config, o)
	if err != nil {
		return nil, redactErr(fmt.Errorf("open %s for migration: %w", RedactDSN(dsn), err), dsn)
	}
	return m, nil
}

func mergeOptions(base, o Options) Options {
	if o.MaxArtifactSize > 0 {
		base.MaxArtifactSize = o.MaxArtifactSize
	}
	if o.IdempotencyTTL > 0 {
		base.IdempotencyTTL = o.IdempotencyTTL
	}
	if o.PollInterval > 0 {
		base.PollInterval = o.PollInterval
	}
	if o.Logger != nil {
		base.Logger = o.Logger
	}
	if o.GroupWait != 0 {
		base.GroupWait = o.GroupWait
	}
	if o.PolicyRecheck != 0 {
		base.PolicyRecheck = o.PolicyRecheck
	}
	base.Private = base.Private || o.Private
	base.MustExist = base.MustExist || o.MustExist
	return base
}

// secretParams are the URL DSN parameters that hold a secret: a
// database's password, a server's bearer token.
var secretParams = []string{"password", "ws_token"}

func isSecretParam(k string) bool { return k == "password" || k == "ws_token" }

var kvPasswordRE = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)

// RedactDSN returns dsn with any password (and a server's ws_token)
// replaced by "xxxxx", for messages and logs.
func RedactDSN(dsn string) string {
	if scheme, rest, ok := strings.Cut(dsn, ":"); ok && strings.HasPrefix(rest, "//") && schemeRE.MatchString(scheme) {
		if u, err := url.Parse(dsn); err == nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			}
			q := u.Query()
			changed := false
			for _, k := range secretParams {
				if q.Has(k) {
					q.Set(k, "xxxxx")
					changed = true
				}
			}
			// A parameter may itself be a DSN (ws_listen_dsn) with its own password.
			for k, vs := range q {
				for i, v := range vs {
					if r := RedactDSN(v); !isSecretParam(k) && r != v {
						vs[i], changed = r, true
					}
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
		// Unparseable URL: hide everything between "//" and "@".
		if at := strings.LastIndex(rest, "@"); at > 2 {
			return scheme + "://xxxxx@" + rest[at+1:]
		}
	}
	return kvPasswordRE.ReplaceAllString(dsn, "${1}xxxxx")
}

// secrets returns the passwords in dsn, for scrubbing error texts.
func secrets(dsn string) []string {
	var out []string
	if u, err := url.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
		for _, k := range secretParams {
			if pw := u.Query().Get(k); pw != "" {
				out = append(out, pw, url.QueryEscape(pw))
			}
		}
		for k, vs := range u.Query() {
			for _, v := range vs {
				if !isSecretParam(k) && v != dsn {
					out = append(out, secrets(v)...)
				}
			}
		}
	}
	for _, m := range kvPasswordRE.FindAllStringSubmatch(dsn, -1) {
		if pw := strings.Trim(m[2], "'"); pw != "" {
			out = append(out, pw)
		}
	}
	return out
}

// redactErr hides dsn's passwords in err's text while keeping err's chain.
func redactErr(err error, dsn string) error {
	s := secrets(dsn)
	if err == nil || len(s) == 0 {
		return err
	}
	return &redactedError{err: err, secrets: s}
}

type redactedError struct {
	err     error
	secrets []string
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		if len(s) >= 1 {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// RedactError hides the passwords of dsn in err's text, keeping errors.Is and errors.As working.
func RedactError(err error, dsn string) error { return redactErr(err, dsn) }

// attacher is the conn capability Attach uses.
type attacher interface {
	Attach() (*Workspace, error)
}

// Attach returns another handle on the store ws is open on, as Open does
// for a second handle on one DSN: it shares ws's store, writer queue and
// event hub, and closes on its own; the store closes with the last of its
// handles. It serves handles made by a backend's own constructor, and ws
// may be closed before the new handle is. A closed ws gives ErrClosed.
func (ws *Workspace) Attach() (*Workspace, error) {
	a, ok := ws.c.(attacher)
	if !ok {
		return nil, ws.unsupported("attach")
	}
	return a.Attach()
}
