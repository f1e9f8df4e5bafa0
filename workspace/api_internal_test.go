package workspace

import (
	"context"
	"errors"
	"testing"
)

// bareConn has only the methods every connection has: no admin capability.
type bareConn struct{ conn }

func TestAdminOperationsAnswerErrUnsupportedWhereTheBackendCannot(t *testing.T) {
	ctx := context.Background()
	ws := &Workspace{c: bareConn{}}
	checks := map[string]error{}
	_, checks["gc"] = ws.GC(ctx, GCPolicy{})
	_, checks["verify"] = ws.Verify(ctx)
	_, checks["backup"] = ws.Backup(ctx, t.TempDir()+"/copy.db")
	_, checks["export"] = ws.Export(ctx, nil, ArchiveOptions{})
	_, checks["import"] = ws.Import(ctx, nil, ArchiveOptions{})
	_, checks["attach"] = ws.Attach()
	for op, err := range checks {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s on a backend without it: %v, want errors.ErrUnsupported", op, err)
		}
	}
}
