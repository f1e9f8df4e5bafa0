package remote

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// The request shapes are the wire package's (wire.WriteFieldsOf, ...), the
// ones the server decodes, so the client cannot drift from them; what is
// here puts the query parameters.

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
		return &workspace.InvalidError{Field: "content", Reason: strconv.Itoa(len(b)) + " bytes is over the limit of " + strconv.FormatInt(c.opts.MaxArtifactSize, 10) + " (the client's ws_max_artifact_size)", TooLarge: true}
	}
	return nil
}
