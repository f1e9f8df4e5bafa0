package agents

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TokenKind is the note kind that holds tokens: one note per token, keyed
// by the token's public id, whose body is the token's record (actor, role,
// SHA-256 of the secret, times, revoked). Keeping them in the workspace
// means every server on the same store accepts the same tokens, and
// creating or revoking one is an event like any other write. The kind is
// reserved and sealed (tokenKey): the engine refuses to write or read these
// notes from any face but this file's operations.
const TokenKind = "token"

// tokenKey is the capability to write and read the token notes.
var tokenKey = reserve.Own(TokenKind, nil)

// ErrBadToken is the one answer for every token that does not pass, so
// that a caller learns nothing of why (unknown, revoked, expired, or a
// wrong secret).
var ErrBadToken = fmt.Errorf("%w: the token is unknown, revoked or expired", wire.ErrUnauthorized)

// TokenPrefix starts every token: ast_<id>_<secret>.
const TokenPrefix = "ast_"

// DefaultTokenTTL is a token's life when TokenRequest.TTL is zero.
const DefaultTokenTTL = 30 * 24 * time.Hour

// Token is what is known of a token besides its secret.
type Token struct {
	ID        string    `json:"id"`
	Actor     string    `json:"actor"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	CreatedBy string    `json:"created_by"`
	ExpiresAt time.Time `json:"expires_at,omitzero"` // zero: never
	Revoked   bool      `json:"revoked"`
}

// tokenRecord is a token note's body.
type tokenRecord struct {
	Actor     string    `json:"actor"`
	Role      string    `json:"role"`
	Hash      string    `json:"hash"` // hex SHA-256 of the secret part
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Revoked   bool      `json:"revoked"`
}

// TokenRequest is what Tokens.Create takes.
type TokenRequest struct {
	Actor string // who the token acts as (required)
	Role  string // an optional role name, recorded with the token
	// TTL is the token's life (default DefaultTokenTTL; negative: never expires).
	TTL time.Duration
	// By is the operator who creates it: the token note's write, and so
	// its event, is By's, with a message naming Actor (default: Actor,
	// a token made for oneself).
	By string
}

// Tokens creates, lists, revokes and checks bearer tokens kept in a
// workspace through its public API.
type Tokens struct {
	ws  *workspace.Workspace
	now func() time.Time
}

// NewTokens returns the token store of ws.
func NewTokens(ws *workspace.Workspace) *Tokens { return &Tokens{ws: ws, now: time.Now} }

var (
	b32     = base32.StdEncoding.WithPadding(base32.NoPadding)
	roleRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`) })
	tokenRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ast_([a-z2-7]{16})_([a-z2-7]{52})$`) })
)

// TokenID returns the public id of a string shaped as a token
// (ast_<id>_<secret>), and whether it is one; it checks nothing else.
func TokenID(token string) (string, bool) {
	m := tokenRE().FindStringSubmatch(token)
	if m == nil {
		return "", false
	}
	return m[1], true
}

func randomWord(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return strings.ToLower(b32.EncodeToString(b)), nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Create makes a token and returns it: the only time its secret is
// shown. Only the secret's SHA-256 is stored.
func (t *Tokens) Create(ctx context.Context, r TokenRequest) (string, Token, error) {
	if r.Actor == "" || len(r.Actor) > workspace.MaxActorLen {
		return "", Token{}, &workspace.InvalidError{Field: "actor", Reason: fmt.Sprintf("must be 1 to %d bytes", workspace.MaxActorLen)}
	}
	if r.Role != "" && !roleRE().MatchString(r.Role) {
		return "", Token{}, &workspace.InvalidError{Field: "role", Reason: "must be a lower-case word (a-z, 0-9, _ or -, starting with a letter)"}
	}
	if r.By == "" {
		r.By = r.Actor
	}
	id, err := randomWord(10) // 16 characters
	if err != nil {
		return "", Token{}, err
	}
	secret, err := randomWord(32) // 52 characters, 256 bits
	if err != nil {
		return "", Token{}, err
	}
	now := t.now().UTC()
	rec := tokenRecord{Actor: r.Actor, Role: r.Role, Hash: hashSecret(secret), CreatedAt: now, CreatedBy: r.By}
	switch {
	case r.TTL == 0:
		rec.ExpiresAt = now.Add(DefaultTokenTTL)
	case r.TTL > 0:
		rec.ExpiresAt = now.Add(r.TTL)
	}
	if err := t.put(ctx, r.By, id, rec, 0, "token "+id+" created for "+r.Actor); err != nil {
		return "", Token{}, err
	}
	return TokenPrefix + id + "_" + secret, rec.public(id), nil
}

// put writes a token's record as by, the operator, with message saying
// what was done for whom.
func (t *Tokens) put(ctx context.Context, by, id string, rec tokenRecord, ifVersion int64, message string) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = t.ws.Notes().Put(tokenKey.Grant(ctx), workspace.Write{Actor: by, IfVersion: ifVersion, Message: message},
		workspace.NotePut{Kind: TokenKind, Key: id, Title: "token for " + rec.Actor, Body: string(body)})
	return err
}

func (rec tokenRecord) public(id string) Token {
	return Token{ID: id, Actor: rec.Actor, Role: rec.Role, CreatedAt: rec.CreatedAt, CreatedBy: rec.CreatedBy, ExpiresAt: rec.ExpiresAt, Revoked: rec.Revoked}
}

func (t *Tokens) get(ctx context.Context, id string) (tokenRecord, workspace.Note, error) {
	n, err := t.ws.Notes().Get(tokenKey.Grant(ctx), TokenKind, id)
	if err != nil {
		return tokenRecord{}, n, err
	}
	var rec tokenRecord
	if err := json.Unmarshal([]byte(n.Body), &rec); err != nil {
		return tokenRecord{}, n, fmt.Errorf("token %s: its record does not parse: %w", id, err)
	}
	return rec, n, nil
}

// List returns every token, revoked and expired ones included, without
// their hashes.
func (t *Tokens) List(ctx context.Context) ([]Token, error) {
	var out []Token
	f := workspace.NoteFilter{Kind: TokenKind, Limit: 1000}
	for {
		page, err := t.ws.Notes().List(tokenKey.Grant(ctx), f)
		if err != nil {
			return nil, err
		}
		for _, n := range page.Notes {
			var rec tokenRecord
			if err := json.Unmarshal([]byte(n.Body), &rec); err != nil {
				return nil, fmt.Errorf("token %s: its record does not parse: %w", n.Key, err)
			}
			out = append(out, rec.public(n.Key))
		}
		if page.Next == "" {
			return out, nil
		}
		f.After = page.Next
	}
}

// Revoke marks the token revoked: every server refuses it from then on.
// idOrToken is the token's id or the whole token.
func (t *Tokens) Revoke(ctx context.Context, by, idOrToken string) (Token, error) {
	id := idOrToken
	if m := tokenRE().FindStringSubmatch(idOrToken); m != nil {
		id = m[1]
	}
	rec, n, err := t.get(ctx, id)
	if err != nil {
		return Token{}, fmt.Errorf("token %s: %w", truncate(id, 32), err)
	}
	if rec.Revoked {
		return rec.public(id), nil
	}
	rec.Revoked = true
	if by == "" {
		by = rec.Actor
	}
	if err := t.put(ctx, by, id, rec, n.Version, "token "+id+" of "+rec.Actor+" revoked"); err != nil {
		return Token{}, err
	}
	return rec.public(id), nil
}

// Verify checks a presented token and returns what it stands for. Every
// failure is the same wire.ErrUnauthorized, and never contains the token.
func (t *Tokens) Verify(ctx context.Context, token string) (Token, error) {
	m := tokenRE().FindStringSubmatch(token)
	if m == nil {
		return Token{}, ErrBadToken
	}
	rec, _, err := t.get(ctx, m[1])
	if errors.Is(err, workspace.ErrNotFound) {
		return Token{}, ErrBadToken
	}
	if err != nil {
		return Token{}, fmt.Errorf("token %s: %w", m[1], err)
	}
	// Compare hashes, not secrets, in constant time: no timing says how
	// much of a guess was right.
	if subtle.ConstantTimeCompare([]byte(hashSecret(m[2])), []byte(rec.Hash)) != 1 {
		return Token{}, ErrBadToken
	}
	if rec.Revoked || (!rec.ExpiresAt.IsZero() && !t.now().Before(rec.ExpiresAt)) {
		return Token{}, ErrBadToken
	}
	return rec.public(m[1]), nil
}
