package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// pipeline is a transaction's querier: writes (Exec) are queued and sent
// together, in one round trip, with the next read or the COMMIT. A queued
// write's error therefore surfaces at that next call, which fails the
// transaction as the write itself would have.
type pipeline struct {
	sender interface {
		SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	}
	// ctx is the transaction's: every send runs under it, not under the
	// context of the call that caused it. A send carries what other calls
	// queued (a group's jobs, each with its caller's context): one caller
	// that gives up must not take the others' statements with it, nor
	// leave a savepoint unsent (3B001 at the rollback). The transaction's
	// context ends when every caller in it has given up.
	ctx   context.Context
	batch *pgx.Batch
	sqls  []string
	// frontend is the connection's message writer, when the sender has
	// one, and size what the queued statements' messages will take on
	// the wire, roughly (see reserve).
	frontend *pgproto3.Frontend
	size     int
	// generic is set while the transaction plans with genericOn's
	// setting, not yet restored: a predicted group's, from its guard on
	// (see lockWriteGeneric). Writes of one row by its key keep it (their
	// generic plan is their only plan); any other statement restores the
	// setting first (Exec).
	generic bool
	// ahead is a lease row read in the same round trip as the record it
	// guards (see leaseAhead); any queued statement drops it.
	ahead *leaseAhead
	// early are the records a hinted transaction read as it started (see
	// store.UpdateHinted), each taken once; a write that changes a record
	// or a lease drops those it touches (dropEarly, dropEarlyHint).
	early []*earlyRead
	// predicted is set in a transaction run on a prediction (see
	// predict.go): nothing may be read, only what was predicted, and a read
	// sets unpredicted and fails with errUnpredicted.
	predicted, unpredicted bool
	// failedAt is the index of the statement whose error commit returned.
	failedAt int
	// broken is the error of a send that failed at or before a savepoint
	// statement (SAVEPOINT, RELEASE, ROLLBACK TO) it carried: the
	// server's savepoints are then not those the transaction counts, and a
	// rollback to the newest would undo the wrong job's writes or fail
	// with 3B001. Every later send, and the commit, fail with it unsent.
	broken error
}

// earlyRead is a record read before it was asked for, as its hint names
// it (an artifact, a note, a task, a lease, a claim's reads), with the
// lease that guards it.
type earlyRead struct {
	hint     driver.ReadHint
	artifact workspace.Artifact
	note     workspace.Note
	task     workspace.Task // also a claim's ready task
	err      error
	lease    leaseAhead
	// A claim's: the tasks whose claims had lapsed by a clock no earlier
	// than the transaction's, at most earlyLapsed of them (expiredTaken
	// once ExpiredClaims has used them).
	expired      []workspace.Task
	expiredTaken bool
	// A read's (see ViewHinted): the head's content, nil when its blob
	// is missing.
	content     []byte
	contentRead bool
}

// leaseAhead is the lease of resource as read ahead, or err (ErrNoRows).
type leaseAhead struct {
	resource string
	lease    workspace.Lease
	err      error
}

func newPipeline(ctx context.Context, conn interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}) *pipeline {
	p := &pipeline{ctx: ctx, sender: conn, batch: &pgx.Batch{}}
	if c, ok := conn.(interface{ Conn() *pgx.Conn }); ok {
		p.frontend = c.Conn().PgConn().Frontend()
	}
	return p
}

// Exec queues a statement.
func (p *pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.generic && !keyedWrites[sql] {
		p.queue(genericBack)
		p.generic = false
	}
	p.queue(sql, args...)
	p.ahead = nil
	return pgconn.CommandTag{}, nil
}

// keyedWrites are the statements that write rows named by their keys, and
// append events: planned alike whatever their arguments, they may run
// with generic plans forced (see pipeline.generic).
var keyedWrites = map[string]bool{
	putArtifact: true, deleteArtifact: true, putNote: true, deleteNote: true, putTask: true,
	putLease: true, putIdempotent: true, appendEvent: true, appendEvents: true,
}

// dropEarly drops the early reads a write makes stale: those of artifact
// id (by ID, or found by name), of name (found or not: the write may
// create or rename an artifact to it), and of the lease named resource.
// Empty arguments match nothing.
func (p *pipeline) dropEarly(id, name, resource string) {
	p.early = slices.DeleteFunc(p.early, func(e *earlyRead) bool {
		return id != "" && (e.hint.Artifact.ID == id || (e.err == nil && e.artifact.ID == id)) ||
			name != "" && e.hint.Artifact.Name == name ||
			resource != "" && e.lease.resource == resource
	})
}

// dropEarlyHint drops the early read of the note or task h names: a write
// of it makes it stale. A task's write also drops a claim's reads, whose
// answers any task's write may change.
func (p *pipeline) dropEarlyHint(h driver.ReadHint) {
	p.early = slices.DeleteFunc(p.early, func(e *earlyRead) bool {
		return e.hint == h || h.Task != "" && e.hint.Claim != nil
	})
}

// queue queues a statement that changes no row (a savepoint's), keeping
// what was read ahead.
func (p *pipeline) queue(sql string, args ...any) {
	p.batch.Queue(sql, args...)
	p.sqls = append(p.sqls, sql)
	p.size += wireSize(args)
}

// sendBatch sends b, reserving first the room its messages take in the
// connection's send buffer.
func (p *pipeline) sendBatch(b *pgx.Batch, reads []rowQuery) pgx.BatchResults {
	size := p.size
	p.size = 0
	for _, r := range reads {
		size += wireSize(r.args)
	}
	reserve(p.frontend, size)
	return p.sender.SendBatch(p.ctx, b)
}

// reserve grows f's send buffer, in one allocation, to hold n bytes more.
// pgproto3's Frontend drops a buffer longer than 1 KiB once it has sent
// it, so a batch of a group's writes (a few KiB of content and arguments)
// would otherwise regrow it, message by message, in a dozen allocations
// of ever larger copies on every send: a quarter of the bytes a served
// write allocated. It sends nothing: the message it queues encodes to no
// bytes.
func reserve(f *pgproto3.Frontend, n int) {
	if f != nil && n > minReserve {
		f.Send(room(n))
	}
}

// minReserve is the size below which reserve leaves the buffer as it is:
// it keeps 1 KiB.
const minReserve = 1024

// room is a frontend message that encodes to no bytes but grows the
// buffer it is appended to by its value.
type room int

func (room) Frontend()           {}
func (room) Decode([]byte) error { return nil }
func (n room) Encode(dst []byte) ([]byte, error) {
	return slices.Grow(dst, int(n)), nil
}

// wireSize is about what a statement with args takes on the wire: its
// Bind, Describe and Execute messages, which name the prepared statement,
// and each argument's value with its length and format.
func wireSize(args []any) int {
	n := 96
	for _, a := range args {
		n += 8
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		case []string:
			n += 24
			for _, s := range v {
				n += 4 + len(s)
			}
		case [][]byte:
			n += 24
			for _, b := range v {
				n += 4 + len(b)
			}
		case []time.Time:
			n += 24 + 12*len(v)
		case []int64:
			n += 24 + 12*len(v)
		default:
			n += 8
		}
	}
	return n
}

// send sends the queued statements followed by reads, in one round trip,
// and returns the results positioned at the first read. It runs under the
// transaction's context (see pipeline.ctx); the caller's is not used.
func (p *pipeline) send(_ context.Context, reads ...rowQuery) (pgx.BatchResults, error) {
	if p.predicted {
		p.unpredicted = true
		return nil, errUnpredicted
	}
	if p.broken != nil {
		return nil, p.broken
	}
	b, sqls := p.batch, p.sqls
	p.batch, p.sqls = &pgx.Batch{}, nil
	for _, r := range reads {
		b.Queue(r.sql, r.args...)
	}
	br := p.sendBatch(b, reads)
	for i, s := range sqls {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			err = fmt.Errorf("postgres: %s: %w", summary(s), err)
			if slices.ContainsFunc(sqls[i:], isSavepointStmt) {
				p.broken = err
			}
			return nil, err
		}
	}
	return br, nil
}

// isSavepointStmt reports whether sql is one of a savepoint's statements.
func isSavepointStmt(sql string) bool {
	return strings.HasPrefix(sql, "SAVEPOINT ") || strings.HasPrefix(sql, "RELEASE SAVEPOINT ") ||
		strings.HasPrefix(sql, "ROLLBACK TO SAVEPOINT ")
}

// rowQuery is a read of at most one row, for read.
type rowQuery struct {
	sql  string
	args []any
	// scan gets the row; its error is returned as is.
	scan func(pgx.Row) error
}

// read sends the queued statements and the reads in one round trip.
func (p *pipeline) read(ctx context.Context, reads ...rowQuery) error {
	br, err := p.send(ctx, reads...)
	if err != nil {
		return err
	}
	for _, r := range reads {
		if err := r.scan(br.QueryRow()); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

func (p *pipeline) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := p.send(ctx, rowQuery{sql: sql, args: args})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (p *pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := p.send(ctx, rowQuery{sql: sql, args: args})
	if err != nil {
		return errRow{err}
	}
	return batchRow{br}
}

// commit sends the queued statements and COMMIT together, under the
// transaction's context. On an error, failedAt is the place of the
// statement that failed, COMMIT's being the last.
func (p *pipeline) commit() (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	if p.broken != nil {
		p.failedAt = 0
		return tag, p.broken
	}
	p.batch.Queue(commitStmt)
	p.sqls = append(p.sqls, commitStmt)
	b, sqls := p.batch, p.sqls
	p.batch, p.sqls = &pgx.Batch{}, nil
	br := p.sendBatch(b, nil)
	for i, s := range sqls {
		ct, err := br.Exec()
		if err != nil {
			_ = br.Close()
			p.failedAt = i
			return tag, fmt.Errorf("%s: %w", summary(s), err)
		}
		if i == len(sqls)-1 {
			tag = ct
		}
	}
	err := br.Close()
	if tag.String() == "COMMIT" {
		// Committed: a failure after that (the backend terminated) changes nothing.
		return tag, nil
	}
	return tag, err
}

// batchRow is the row of a read sent last in a batch: Scan reads it and
// ends the batch. Every QueryRow is followed by its Scan.
type batchRow struct{ br pgx.BatchResults }

func (r batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the rows of a read sent last in a batch; the batch ends
// with them.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// textArray is ss as a text[] literal, every element quoted (so that no
// element reads as NULL and spaces are kept) with its quotes and
// backslashes escaped. pgx sends a string argument in text format, as
// is, and the server parses it for the placeholder's text[] type: one
// value, where a []string is encoded element by element, each boxed.
func textArray(ss []string) string {
	return textArrayOfN(len(ss), func(i int) string { return ss[i] })
}

// textArrayOf is textArray of field of each event.
func textArrayOf(events []workspace.Event, field func(e *workspace.Event) string) string {
	return textArrayOfN(len(events), func(i int) string { return field(&events[i]) })
}

func textArrayOfN(n int, at func(i int) string) string {
	size := 2
	for i := range n {
		size += len(at(i)) + 3
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		s := at(i)
		// A quote or backslash is never part of a multibyte UTF-8
		// sequence: escaping byte by byte is escaping by character.
		for j := 0; j < len(s); j++ {
			if c := s[j]; c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// summary names a statement for an error: its first words, up to the table.
func summary(sql string) string {
	f := strings.Fields(sql)
	for i, w := range f {
		if w == "INTO" || w == "UPDATE" || w == "FROM" {
			if i+1 < len(f) {
				return strings.ToLower(strings.Join(f[:i+2], " "))
			}
		}
	}
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.ToLower(strings.Join(f, " "))
}

// errRow is a pgx.Row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
