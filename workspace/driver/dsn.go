package driver

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

	"github.com/agentspace/agentspace/internal/redact"
	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/workspace"
)

// The registry of schemes and the parsing of DSNs: workspace.Open and
// workspace.OpenMigrator reach them through internal/wsconn, so that the
// user's package holds no implementer's type.

func init() { wsconn.Serve(open, openMigrator) }

// Config is what a Backend (and a Driver) gets from workspace.Open: the DSN with every ws_
// parameter removed, and those parameters parsed.
type Config struct {
	// Scheme is the DSN's scheme as given ("sqlite", "json", "postgres", ...).
	Scheme string
	// DSN is the DSN without ws_ parameters, ready for the driver.
	DSN string
	// Target is what follows "scheme:" without ws_ parameters (a path for
	// sqlite and json). For URL DSNs it equals DSN.
	Target string
	// Params holds the backend's own ws_ parameters that were given.
	Params map[string]string
	// AutoMigrate (ws_automigrate) lets Open migrate an older schema up.
	AutoMigrate bool
	// PollInterval (ws_poll) is how often other processes' writes are looked for.
	PollInterval time.Duration
	// Logger receives the backend's diagnostics; never nil.
	Logger *slog.Logger
}

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

// Backend opens the workspaces of the schemes it is registered under
// (Register). A backend that stores the workspace itself implements
// Driver, and registers the Backend the engine makes of it
// (engine.Backend), which wraps its stores in the engine; one that reaches
// a workspace elsewhere (the client of a server, in this module)
// implements Backend itself.
type Backend interface {
	// Open returns a handle on the workspace cfg names. opts has its
	// defaults set; with opts.MustExist, Open creates nothing and fails
	// with a *NoWorkspaceError where there is no workspace.
	Open(ctx context.Context, cfg Config, opts workspace.Options) (*workspace.Workspace, error)
	// Params lists the backend's own ws_ DSN parameters; any other ws_
	// parameter not known to this package is an error.
	Params() []string
}

// MigratingBackend is an optional Backend capability, used by
// OpenMigrator. Of opts, only MustExist applies.
type MigratingBackend interface {
	Backend
	OpenMigrator(ctx context.Context, cfg Config, opts workspace.Options) (workspace.Migrator, error)
}

// Register makes b the backend of scheme, for workspace.Open and
// workspace.OpenMigrator. It is meant to be called from a backend's init;
// registering a scheme twice, or a nil backend, panics.
func Register(scheme string, b Backend) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if b == nil {
		panic("driver: Register backend is nil")
	}
	if _, dup := registry[scheme]; dup {
		panic("driver: a backend is registered twice for scheme " + scheme)
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

// ParsedDSN is a DSN taken apart: the backend and its Config, and the handle's Options.
type ParsedDSN struct {
	Backend Backend
	Config  Config
	Options workspace.Options
}

var schemeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*$`) })

// ParseDSN splits dsn into its scheme, its ws_ parameters and the rest, and
// finds the registered backend. Errors never contain a password.
func ParseDSN(dsn string) (ParsedDSN, error) {
	var p ParsedDSN
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok || !schemeRE().MatchString(scheme) {
		return p, invalid("dsn", "%q has no scheme: want one of %s (e.g. %s)", workspace.RedactDSN(dsn), schemeList(), workspace.DefaultDSN)
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
			return p, invalid("dsn", "%s is not a valid URL", workspace.RedactDSN(dsn))
		}
		query = u.RawQuery
		u.RawQuery = ""
		base = u.String()
	} else {
		base, query, _ = strings.Cut(rest, "?")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return p, invalid("dsn", "bad query in %s: %v", workspace.RedactDSN(dsn), err)
	}

	own := map[string]bool{}
	for _, name := range d.Params() {
		own[name] = true
	}
	cfg := Config{Scheme: scheme, Params: map[string]string{}, PollInterval: workspace.DefaultPollInterval}
	var opts workspace.Options
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

func invalid(field, format string, args ...any) error {
	return &workspace.InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func schemeList() string {
	s := Schemes()
	if len(s) == 0 {
		return "(none: import a backend, e.g. _ \"github.com/agentspace/agentspace/backend/sqlite\")"
	}
	return strings.Join(s, ", ")
}

// RedactError hides the passwords of dsn in err's text, keeping errors.Is
// and errors.As working; workspace.RedactDSN hides them in dsn itself.
func RedactError(err error, dsn string) error { return redact.Error(err, dsn) }

// open is workspace.Open, which calls it through internal/wsconn.
func open(ctx context.Context, dsn string, opts []workspace.Options) (*workspace.Workspace, error) {
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
		return nil, RedactError(fmt.Errorf("open %s: %w", workspace.RedactDSN(dsn), err), dsn)
	}
	return ws, nil
}

// openMigrator is workspace.OpenMigrator, called through internal/wsconn.
func openMigrator(ctx context.Context, dsn string, opts []workspace.Options) (workspace.Migrator, error) {
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
		return nil, RedactError(fmt.Errorf("open %s for migration: %w", workspace.RedactDSN(dsn), err), dsn)
	}
	return m, nil
}

func mergeOptions(base, o workspace.Options) workspace.Options {
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
	if o.Clock != nil {
		base.Clock = o.Clock
	}
	if o.PolicyRecheck != 0 {
		base.PolicyRecheck = o.PolicyRecheck
	}
	base.Private = base.Private || o.Private
	base.MustExist = base.MustExist || o.MustExist
	return base
}
