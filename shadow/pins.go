package shadow

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentspace/agentspace/internal/reserve"

	"github.com/agentspace/agentspace/workspace"
)

// PinReport is what PinPromoted did.
type PinReport struct {
	// Pinned counts the pins written; Already, the versions that had one.
	Pinned  int `json:"pinned"`
	Already int `json:"already"`
	// Gone lists the promoted versions that could not be pinned: their
	// artifact is deleted (Workspace.Pin pins live artifacts only), the
	// version was already removed, or the name now holds other content.
	// Retention treats them as any unpinned version.
	Gone []PromotedVersion `json:"gone,omitempty"`
}

// PinPromoted pins, as actor, every version a change set's promotion
// wrote that has no pin: the upgrade step for a workspace whose sets were
// promoted before promotions pinned what they wrote (retention then read
// the sets' records; now it keeps versions by their pins alone). Run it
// once after upgrading, before the first gc; it is safe to run again. It
// needs the right to put pin notes (Workspace.Pin).
func (c *ChangeSets) PinPromoted(ctx context.Context, actor string) (PinReport, error) {
	var r PinReport
	sets, err := c.List(ctx)
	if err != nil {
		return r, err
	}
	arts := c.m.ws.Artifacts()
	for _, cs := range sets {
		for _, pv := range cs.Promoted {
			a, err := c.promotedVersion(ctx, pv)
			if errors.Is(err, workspace.ErrNotFound) {
				r.Gone = append(r.Gone, pv)
				continue
			}
			if err != nil {
				return r, fmt.Errorf("change set %s: %s version %d: %w", cs.Name, pv.Name, pv.Version, err)
			}
			_, err = c.m.ws.Notes().Get(ctx, workspace.PinKind, reserve.PinKey(a.ID, a.Version))
			if err == nil {
				r.Already++
				continue
			}
			if !errors.Is(err, workspace.ErrNotFound) {
				return r, err
			}
			// Workspace.Pin pins the live artifact of the name: only if it is
			// the one the set promoted.
			live, err := arts.Get(ctx, workspace.ByName(a.Name))
			if errors.Is(err, workspace.ErrNotFound) || (err == nil && live.ID != a.ID) {
				r.Gone = append(r.Gone, pv)
				continue
			}
			if err != nil {
				return r, err
			}
			if _, err := c.m.ws.Pin(ctx, workspace.Write{Actor: actor, Message: message(EventCSPromoted, cs.Name, "pinned on upgrade")}, a.Name, a.Version); err != nil {
				return r, fmt.Errorf("change set %s: %s version %d: %w", cs.Name, a.Name, a.Version, err)
			}
			r.Pinned++
		}
	}
	return r, nil
}

// promotedVersion reads the version pv names: by ID, or for a created
// artifact by name at version 1 with the content the set promoted.
func (c *ChangeSets) promotedVersion(ctx context.Context, pv PromotedVersion) (workspace.Artifact, error) {
	if pv.ID != "" {
		return c.m.ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: pv.ID, Version: pv.Version})
	}
	a, err := c.m.ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: pv.Name, Version: pv.Version})
	if err == nil && a.SHA256 != pv.SHA256 {
		return workspace.Artifact{}, fmt.Errorf("%s version %d holds other content: %w", pv.Name, pv.Version, workspace.ErrNotFound)
	}
	return a, err
}

// Unpin lets retention remove what set's promotions wrote: it removes
// each listed version's pin, as actor (Workspace.Unpin, so it needs
// the right to delete pin notes), and empties the set's list, so that
// PinPromoted does not pin them again. It returns the pins removed; a
// version whose artifact is deleted or renamed since, or which gc already
// removed, is returned in gone (a pin of a deleted artifact's version
// stays: Workspace.Unpin needs the live artifact).
func (c *ChangeSets) Unpin(ctx context.Context, set, actor string) (removed int, gone []PromotedVersion, err error) {
	cs, err := c.Get(ctx, set)
	if err != nil {
		return 0, nil, err
	}
	if actor == "" {
		actor = cs.Actor
	}
	w := workspace.Write{Actor: actor, Message: message(EventCSUnpinned, cs.Name, "")}
	for _, pv := range cs.Promoted {
		a, err := c.promotedVersion(ctx, pv)
		if err == nil {
			var live workspace.Artifact
			live, err = c.m.ws.Artifacts().Get(ctx, workspace.ByName(a.Name))
			if err == nil && live.ID != a.ID {
				err = workspace.ErrNotFound
			}
		}
		if errors.Is(err, workspace.ErrNotFound) {
			gone = append(gone, pv)
			continue
		}
		if err == nil {
			err = c.m.ws.Unpin(ctx, w, a.Name, a.Version)
			if err == nil {
				removed++
				continue
			}
		}
		if !errors.Is(err, workspace.ErrNotFound) { // not pinned: nothing to remove
			return removed, gone, fmt.Errorf("change set %s: %s version %d: %w", set, pv.Name, pv.Version, err)
		}
	}
	cs.Promoted = nil
	_, err = c.save(ctx, cs, actor, EventCSUnpinned, fmt.Sprintf("%d pins removed", removed))
	return removed, gone, err
}
