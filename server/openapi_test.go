package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// TestOpenAPIDocumentIsValidAndComplete loads the served document with
// kin-openapi, validates it, and finds in it every route the mux serves:
// the document is generated from the handlers, and this keeps the hand-
// written parts (the event stream) from drifting.
func TestOpenAPIDocumentIsValidAndComplete(t *testing.T) {
	ws, err := workspace.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	s, err := New(ws, Options{})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)

	resp, err := hs.Client().Get(hs.URL + "/v1/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(body)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	assert.True(t, strings.HasPrefix(doc.OpenAPI, "3.1"), "version %s", doc.OpenAPI)

	require.NotEmpty(t, s.served)
	for _, route := range s.served {
		method, path, _ := strings.Cut(route, " ")
		item := doc.Paths.Find(path)
		require.NotNil(t, item, "%s is served but not in the document", route)
		assert.NotNil(t, item.GetOperation(method), "%s is served but not in the document", route)
	}
	// And the other way round: every documented operation is served.
	served := map[string]bool{}
	for _, r := range s.served {
		served[r] = true
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			assert.True(t, served[method+" "+path], "%s %s is documented but not served", method, path)
		}
	}
}
