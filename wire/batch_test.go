package wire_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/wire"
)

// TestContentSurvivesTheWire: bytes put on the wire as text or base64
// decode to the same bytes, and absent content stays absent.
func TestContentSurvivesTheWire(t *testing.T) {
	for _, b := range [][]byte{nil, {}, []byte("plain text"), {0, 1, 2, 0xff}, []byte("é\x00")} {
		c := wire.ContentOf(b)
		got, err := c.Bytes()
		require.NoError(t, err)
		assert.Equal(t, b, got)
	}
	assert.Empty(t, wire.ContentOf([]byte("x")).ContentEncoding)
	assert.Equal(t, "base64", wire.ContentOf([]byte{0xff}).ContentEncoding)
}
