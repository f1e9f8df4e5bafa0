// Package redact hides the secrets of a DSN: in the DSN itself
// (workspace.RedactDSN) and in an error's text (driver.RedactError). It is
// the one implementation of both, below the user's package and the backend
// contract that export them.
package redact

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// secretParams are the URL DSN parameters that hold a secret: a
// database's password, a server's bearer token.
var secretParams = []string{"password", "ws_token"}

func isSecretParam(k string) bool { return k == "password" || k == "ws_token" }

var schemeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*$`) })

var kvPasswordRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`) })

// DSN returns dsn with any password (and a server's ws_token) replaced by
// "xxxxx", for messages and logs: workspace.RedactDSN.
func DSN(dsn string) string {
	if scheme, rest, ok := strings.Cut(dsn, ":"); ok && strings.HasPrefix(rest, "//") && schemeRE().MatchString(scheme) {
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
					if r := DSN(v); !isSecretParam(k) && r != v {
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
	return kvPasswordRE().ReplaceAllString(dsn, "${1}xxxxx")
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
	for _, m := range kvPasswordRE().FindAllStringSubmatch(dsn, -1) {
		if pw := strings.Trim(m[2], "'"); pw != "" {
			out = append(out, pw)
		}
	}
	return out
}

// Error hides the passwords of dsn in err's text, keeping errors.Is and
// errors.As working: driver.RedactError.
func Error(err error, dsn string) error {
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
