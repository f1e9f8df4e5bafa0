package engine

import (
	"context"

	"github.com/agentspace/agentspace/workspace/driver"
)

// inventory returns every artifact ID the store holds, live and deleted
// (all false: the caller marks the live ones), and every lease row's
// resource, live and released, from the store's inventory (ReadTx's
// ArtifactIDs and LeaseRows). The third argument, the log's floor, is no
// longer needed: the log is not read.
func inventory(ctx context.Context, tx driver.ReadTx, _ int64) (ids, resources map[string]bool, err error) {
	ids, resources = map[string]bool{}, map[string]bool{}
	for after := ""; ; {
		page, err := tx.ArtifactIDs(ctx, after, archivePage)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range page {
			ids[id] = false
		}
		if len(page) < archivePage {
			break
		}
		after = page[len(page)-1]
	}
	for after := ""; ; {
		page, err := tx.LeaseRows(ctx, after, archivePage)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range page {
			resources[l.Resource] = true
		}
		if len(page) < archivePage {
			break
		}
		after = page[len(page)-1].Resource
	}
	return ids, resources, nil
}
