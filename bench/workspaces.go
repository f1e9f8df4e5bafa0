package bench

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// Many workspaces: with Config.Workspaces N, the children of
// Config.Processes are spread over N workspaces on the DSN's database
// (child i on workspace i mod N), each with servers of its own. A
// workspace's writers take turns on its lock (on PostgreSQL the writers'
// advisory lock, on SQLite the file's write lock), so N workspaces
// measure what N such locks commit side by side on one database server.
// Workspace 1 is the DSN's own; workspace k >= 2 is its sibling named by
// WorkspaceDSN: on PostgreSQL the schema <ws_schema>_wK in the same
// database, on SQLite the file <name>-wK<.ext> next to the DSN's. The
// siblings are created when missing and kept, as the DSN's own workspace
// is: the bench writes only records named "bench-..." in them.

// MaxWorkspaces is the most workspaces Config.Workspaces may name.
const MaxWorkspaces = 64

// pgDefaultSchema is the schema a PostgreSQL DSN without ws_schema names
// (backend/postgres.DefaultSchema, which bench does not import).
const pgDefaultSchema = "agentspace"

// ErrWorkspaces is returned, wrapped with the reason, for a
// Config.Workspaces that cannot be measured: out of range, more than the
// processes, without processes, or on a DSN with no sibling workspaces
// (only PostgreSQL and SQLite DSNs have them).
var ErrWorkspaces = errors.New("bench: workspaces")

// CheckWorkspaces reports whether n workspaces can be measured on dsn with
// processes child processes (Config.Processes): n is from 1 to
// MaxWorkspaces, at most processes (each workspace needs a client), and
// above 1 only on a PostgreSQL or SQLite DSN.
func CheckWorkspaces(dsn string, n, processes int) error {
	switch {
	case n < 1 || n > MaxWorkspaces:
		return fmt.Errorf("%w: %d is not a count between 1 and %d", ErrWorkspaces, n, MaxWorkspaces)
	case n == 1:
		return nil
	case processes < 1:
		return fmt.Errorf("%w: %d workspaces need processes to spread over them", ErrWorkspaces, n)
	case n > processes:
		return fmt.Errorf("%w: %d workspaces but %d processes: each workspace needs a process", ErrWorkspaces, n, processes)
	}
	_, err := WorkspaceDSN(dsn, n)
	return err
}

// WorkspaceDSN is the DSN of workspace i (from 1) of the many-workspaces
// rows measured on dsn: dsn itself for 1; for i >= 2, on PostgreSQL dsn
// with ws_schema=<its schema>_wI (its schema "agentspace" when it names
// none), on SQLite the file <name>-wI<.ext> next to dsn's, with dsn's
// parameters. Other backends have no sibling workspaces: ErrWorkspaces.
func WorkspaceDSN(dsn string, i int) (string, error) {
	if i < 1 || i > MaxWorkspaces {
		return "", fmt.Errorf("%w: workspace %d is not between 1 and %d", ErrWorkspaces, i, MaxWorkspaces)
	}
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok {
		return "", fmt.Errorf("%w: the DSN has no scheme", ErrWorkspaces)
	}
	if i == 1 {
		return dsn, nil
	}
	suffix := "_w" + strconv.Itoa(i)
	switch backendOf(strings.ToLower(scheme)) {
	case "postgres":
		if strings.HasPrefix(rest, "//") {
			u, err := url.Parse(dsn)
			if err != nil {
				return "", fmt.Errorf("%w: the DSN is not a valid URL", ErrWorkspaces)
			}
			q := u.Query()
			q.Set("ws_schema", schemaOf(q)+suffix)
			u.RawQuery = q.Encode()
			return u.String(), nil
		}
		base, query, _ := strings.Cut(rest, "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return "", fmt.Errorf("%w: bad query in the DSN: %v", ErrWorkspaces, err)
		}
		q.Set("ws_schema", schemaOf(q)+suffix)
		return scheme + ":" + base + "?" + q.Encode(), nil
	case "sqlite":
		path, query, hasQuery := strings.Cut(rest, "?")
		if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
			return "", fmt.Errorf("%w: sqlite %q is not a file path to put sibling files next to", ErrWorkspaces, path)
		}
		ext := filepath.Ext(path)
		path = strings.TrimSuffix(path, ext) + "-w" + strconv.Itoa(i) + ext
		if hasQuery {
			path += "?" + query
		}
		return scheme + ":" + path, nil
	}
	return "", fmt.Errorf("%w: a %s DSN has no sibling workspaces to spread over: name a postgres or sqlite store", ErrWorkspaces, scheme)
}

// schemaOf is the schema a PostgreSQL DSN's query names.
func schemaOf(q url.Values) string {
	if s := q.Get("ws_schema"); s != "" {
		return s
	}
	return pgDefaultSchema
}
