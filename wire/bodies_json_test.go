package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzArtifactChangeBodyJSON holds AppendJSON to json.Marshal's bytes.
func FuzzArtifactChangeBodyJSON(f *testing.F) {
	f.Add("alice", int64(3), int64(0), "why <now>", "", "plan", "", "\xff", "k", "v", "# text\n\"quoted\"\u2028", "", uint8(0))
	f.Add("", int64(0), int64(-7), "", "key", "", "text/plain", "", "", "", "", "base64", uint8(255))
	f.Fuzz(func(t *testing.T, actor string, ifVersion, fence int64, message, key, kind, ctype, owner, lk, lv, content, enc string, set uint8) {
		b := ArtifactChangeBody{WriteFields: WriteFields{Actor: actor, IfVersion: ifVersion, Fence: fence, Message: message, IdempotencyKey: key}}
		if set&1 != 0 {
			b.Kind = &kind
		}
		if set&2 != 0 {
			b.ContentType = &ctype
		}
		if set&4 != 0 {
			b.Owner = &owner
		}
		if set&8 != 0 {
			b.TaskID = &lk
		}
		if set&16 != 0 {
			b.Labels = map[string]string{}
			if lk != "" {
				b.Labels[lk], b.Labels[lv] = lv, lk
			}
		}
		if set&32 != 0 || content != "" {
			b.Content.Content = &content
		}
		b.ContentEncoding = enc
		want, err := json.Marshal(b)
		require.NoError(t, err)
		require.Equal(t, string(want), string(b.AppendJSON(nil)))
	})
}
