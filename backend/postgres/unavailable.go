package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentspace/agentspace/workspace"
)

// unavailable returns err as a *workspace.UnavailableError when it says
// that the database could not be reached or the connection was lost (and
// err as it is otherwise). unknown marks a connection lost after a
// COMMIT was sent. The cause kept is the driver's error without the name
// of the statement that happened to run into the dead connection: that
// statement is not what failed.
func unavailable(err error, unknown bool) error {
	if err == nil {
		return nil
	}
	var ue *workspace.UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	if nw := missingDatabase(err); nw != nil {
		return nw
	}
	cause, ok := connFailure(err)
	if !ok {
		return err
	}
	return &workspace.UnavailableError{Backend: "postgres", Unknown: unknown, Cause: cause}
}

// connFailure reports whether err is a failure to reach the database or
// a lost connection, and returns the part of it that says so.
func connFailure(err error) (error, bool) {
	var (
		ce *pgconn.ConnectError
		pe *pgconn.PgError
		ne net.Error
	)
	switch {
	case errors.As(err, &ce) && errors.As(err, &pe):
		// The server answered and refused: an outage only if it says so
		// (a missing database or a refused role is not one).
		return ce, unavailableCode(pe.Code)
	case errors.As(err, &ce):
		return ce, true
	case errors.As(err, &pe):
		return pe, unavailableCode(pe.Code)
	case errors.As(err, &ne):
		return ne, !ne.Timeout()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, pgconn.ErrConnClosed):
		return deepest(err), true
	}
	return nil, false
}

// missingDatabase returns a *workspace.NoWorkspaceError when err is the
// server's refusal of a connection to a database that does not exist
// (SQLSTATE 3D000): nothing can be created there until someone creates the
// database, so it says how. It returns nil for any other error.
func missingDatabase(err error) error {
	var (
		ce *pgconn.ConnectError
		pe *pgconn.PgError
	)
	if !errors.As(err, &ce) || !errors.As(err, &pe) || pe.Code != "3D000" || ce.Config == nil {
		return nil
	}
	c := ce.Config
	cmd := "createdb"
	if c.Host != "" && !strings.HasPrefix(c.Host, "/") {
		cmd += " -h " + shellWord(c.Host)
	}
	if c.Port != 0 && c.Port != 5432 {
		cmd += " -p " + strconv.Itoa(int(c.Port))
	}
	if c.User != "" {
		cmd += " -U " + shellWord(c.User)
	}
	cmd += " " + shellWord(c.Database)
	return &workspace.NoWorkspaceError{
		Where:  fmt.Sprintf("database %q", c.Database),
		Reason: fmt.Sprintf("the database does not exist on the server; create it first with '%s' (or SQL's create database)", cmd),
	}
}

// shellWord quotes s for a POSIX shell unless it is a plain word.
func shellWord(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@%+=:,/", r)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// unavailableCode reports whether a server (or pgbouncer) error says the
// database cannot serve now: shutting down, starting up, in recovery, out
// of connection slots, or a connection exception.
func unavailableCode(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
		"53300", // too_many_connections
		"25006": // read_only_sql_transaction: connected to a standby (a failover under way)
		return true
	}
	return strings.HasPrefix(code, "08") // connection_exception
}

func deepest(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
