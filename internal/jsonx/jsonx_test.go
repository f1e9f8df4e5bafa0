package jsonx

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

var stringSeeds = []string{"", "plain", "<a href=\"x\">&amp;</a>", "tab\tnew\nline\r\b\f\x00\x1f\x7f", "\u2028\u2029",
	"bad \xff\xfe utf-8 \xc3", "é ü 日本 😀", `back\slash "quoted" /slash`}

// FuzzAppendString checks that AppendString writes what json.Marshal writes.
func FuzzAppendString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendString(nil, s)))
		require.Equal(t, string(want), string(AppendString(nil, []byte(s))))
	})
}

// FuzzString checks that String, when it reads a literal, reads what
// json.Unmarshal reads, and that it reads every literal json.Unmarshal
// reads and every one json.Marshal writes.
func FuzzString(f *testing.F) {
	for _, s := range stringSeeds {
		b, _ := json.Marshal(s)
		f.Add(string(b))
		f.Add(`"` + s + `"`)
	}
	for _, s := range []string{`"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\u00e9\/"`, `"\'"`, `"\x"`, `"abc`, `"\u12"`, `  "a"  `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		var valid string
		if json.Unmarshal([]byte(lit), &valid) == nil && len(lit) > 1 && lit[0] == '"' && lit[len(lit)-1] == '"' {
			r := Reader{B: []byte(lit)}
			got, ok := r.String()
			require.True(t, ok, "String refuses the literal %q json reads", lit)
			require.Equal(t, len(lit), r.I, "String reads the literal whole")
			require.Equal(t, valid, got)
		}
		r := Reader{B: []byte(lit)}
		got, ok := r.String()
		if ok {
			var want string
			require.NoError(t, json.Unmarshal([]byte(lit[:r.I]), &want), "String read %q, json refuses it", lit[:r.I])
			require.Equal(t, want, got)
		}
		b, err := json.Marshal(lit)
		require.NoError(t, err)
		r = Reader{B: b}
		got, ok = r.String()
		require.True(t, ok, "String refuses json.Marshal's %s", b)
		require.True(t, r.End())
		var want string
		require.NoError(t, json.Unmarshal(b, &want))
		require.Equal(t, want, got)
	})
}

// FuzzInt64 checks that Int64 reads only what json.Unmarshal reads into an
// int64, as it reads it.
func FuzzInt64(f *testing.F) {
	for _, s := range []string{"0", "-0", "12", "-12", "012", "1.5", "1e3", "9223372036854775807", "9223372036854775808", "-", "", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		r := Reader{B: []byte(lit)}
		got, ok := r.Int64()
		if !ok {
			return
		}
		var want int64
		require.NoError(t, json.Unmarshal([]byte(lit[:r.I]), &want), "Int64 read %q, json refuses it", lit[:r.I])
		require.Equal(t, want, got)
	})
}

// TestRawRefusesEscapesAndControls holds Raw to literals a
// json.Unmarshaler can be given as they are.
func TestRawRefusesEscapesAndControls(t *testing.T) {
	for _, lit := range []string{`"a\"b"`, "\"a\nb\"", `"open`, `x`} {
		r := Reader{B: []byte(lit)}
		_, ok := r.Raw()
		require.False(t, ok, lit)
		require.Equal(t, 0, r.I, "a refused token is not consumed")
	}
	r := Reader{B: []byte(` "2026-12-03T14:00:00Z",`)}
	raw, ok := r.Raw()
	require.True(t, ok)
	require.Equal(t, `"2026-12-03T14:00:00Z"`, string(raw))
	require.True(t, r.Delim(','))
	require.True(t, r.End())
}
