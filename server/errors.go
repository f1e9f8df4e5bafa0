package server

import (
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
)

// The error table (typed errors to problem codes and HTTP statuses, and
// back) is the wire package's; huma's own error answers are mapped here.

// fromHuma turns huma's own error answers (a body that did not parse or
// did not match the schema, a body over the cap) into our problem shape,
// keeping their status. Huma's details echo the offending value; that is
// dropped here so that nothing the client sent (a token in the wrong
// field) comes back in an error.
func fromHuma(m *huma.ErrorModel) *wire.Problem {
	code := wire.CodeInvalid
	switch m.Status {
	case http.StatusRequestEntityTooLarge:
		code = wire.CodeTooLarge
	case http.StatusUnsupportedMediaType, http.StatusNotAcceptable:
		code = wire.CodeUnsupported
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
	case http.StatusRequestTimeout:
		code = wire.CodeTimeout
	default:
		if m.Status >= 500 {
			code = wire.CodeInternal
		}
	}
	p := wire.NewProblem(code, m.Detail)
	p.Status, p.Title = m.Status, http.StatusText(m.Status)
	if len(m.Errors) > 0 && m.Errors[0] != nil {
		p.Field, p.Reason = m.Errors[0].Location, m.Errors[0].Message
		p.Detail = fmt.Sprintf("%s: %s: %s", m.Detail, p.Field, p.Reason)
	}
	if code == wire.CodeTooLarge && p.Field == "" {
		p.Field, p.Reason = "body", m.Detail
	}
	return p
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
