package remote

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// The request shapes are the server's own (server.NewArtifactBody, ...),
// so the client cannot drift from what the server decodes.

func writeFields(w workspace.Write) server.WriteFields {
	return server.WriteFields{Actor: w.Actor, IfVersion: w.IfVersion, Fence: w.Fence, Message: w.Message, IdempotencyKey: w.IdempotencyKey}
}

func writeQuery(w workspace.Write) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("actor", w.Actor)
	set("message", w.Message)
	set("idempotency_key", w.IdempotencyKey)
	if w.IfVersion != 0 {
		q.Set("if_version", strconv.FormatInt(w.IfVersion, 10))
	}
	if w.Fence != 0 {
		q.Set("fence", strconv.FormatInt(w.Fence, 10))
	}
	return q
}

// content puts bytes on the wire as the workspace's JSON does: text when
// it is UTF-8 without NUL bytes, else base64; nil stays absent.
func content(b []byte) server.Content {
	if b == nil {
		return server.Content{}
	}
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		s := string(b)
		return server.Content{Content: &s}
	}
	s := base64.StdEncoding.EncodeToString(b)
	return server.Content{Content: &s, ContentEncoding: "base64"}
}

// duration is a Go duration on the wire; zero stays absent (the server's
// default), a negative one is sent so that the server refuses it as the
// library would.
func duration(d time.Duration) server.Duration {
	if d == 0 {
		return ""
	}
	return server.Duration(d.String())
}

// labelQuery puts a label filter in the query: as label=KEY=VALUE pairs,
// or, when a key holds an "=" (which would end it there), as the labels
// JSON object.
func labelQuery(q url.Values, labels map[string]string) {
	for k := range labels {
		if strings.Contains(k, "=") {
			b, _ := json.Marshal(labels)
			q.Set("labels", string(b))
			return
		}
	}
	for k, v := range labels {
		q.Add("label", k+"="+v)
	}
}

func setInt(q url.Values, key string, n int64) {
	if n != 0 {
		q.Set(key, strconv.FormatInt(n, 10))
	}
}

func setStr(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

// tooLarge refuses content over the client's own limit before it is sent,
// as a local handle does.
func (c *Client) checkContent(b []byte) error {
	if int64(len(b)) > c.opts.MaxArtifactSize {
		return &workspace.InvalidError{Field: "content", Reason: strconv.Itoa(len(b)) + " bytes is over the limit of " + strconv.FormatInt(c.opts.MaxArtifactSize, 10), TooLarge: true}
	}
	return nil
}
