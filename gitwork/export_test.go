package gitwork

import "context"

// GrantRecords returns ctx allowed to write worktree records, so that tests
// can leave a record as a crashed process, an older release or a store
// edited by hand would.
func GrantRecords(ctx context.Context) context.Context { return recordKey.Grant(ctx) }
