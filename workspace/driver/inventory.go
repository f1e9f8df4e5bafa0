package driver

import (
	"context"

	"github.com/agentspace/agentspace/workspace"
)

// inventory returns every artifact ID the store holds, live and deleted
// (all false: the caller marks the live ones), and every lease row's
// resource, live and released: from the store's Inventory, or, for a
// store without one, from the log, which names only what happened above
// floor.
func inventory(ctx context.Context, tx ReadTx, floor int64) (ids, resources map[string]bool, err error) {
	ids, resources = map[string]bool{}, map[string]bool{}
	inv, ok := tx.(Inventory)
	if !ok {
		err = eachEvent(ctx, tx, floor, func(ev workspace.Event) error {
			switch ev.Subject.Kind {
			case workspace.SubjectArtifact:
				if ev.Subject.ID != "" {
					ids[ev.Subject.ID] = false
				}
			case workspace.SubjectLock:
				resources[ev.Subject.ID] = true
			}
			return nil
		})
		return ids, resources, err
	}
	for after := ""; ; {
		page, err := inv.ArtifactIDs(ctx, after, archivePage)
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
		page, err := inv.LeaseRows(ctx, after, archivePage)
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
