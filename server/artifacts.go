package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// ArtifactPath names an artifact: by name (URL-escaped, "/" as %2F), or by
// id with by=id.
type ArtifactPath struct {
	Ref string `path:"ref" doc:"The artifact's name, URL-escaped (a / is %2F); its id when by=id."`
	By  string `query:"by" enum:"name,id" doc:"What ref is: name (default) or id."`
}

func (p ArtifactPath) ref() workspace.ArtifactRef {
	if p.By == "id" {
		return workspace.ByID(p.Ref)
	}
	return workspace.ByName(p.Ref)
}

type artifactOut struct {
	Body workspace.Artifact
}

func (s *Server) artifactRoutes() {
	huma.Register(s.api, s.op("createArtifact", http.MethodPost, "/v1/artifacts", "Create an artifact (version 1)", "artifacts", http.StatusCreated),
		func(ctx context.Context, in *struct{ Body wire.NewArtifactBody }) (*artifactOut, error) {
			w, err := s.write(ctx, in.Body.WriteFields)
			if err != nil {
				return nil, err
			}
			n, err := in.Body.Artifact()
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			a, err := s.ws.Artifacts().Create(ctx, w, n)
			return answer(s, ctx, &artifactOut{a}, err)
		})

	huma.Register(s.api, s.op("listArtifacts", http.MethodGet, "/v1/artifacts", "List live artifacts (metadata), by name", "artifacts", 0),
		func(ctx context.Context, in *struct {
			Kind       string   `query:"kind"`
			Owner      string   `query:"owner"`
			NamePrefix string   `query:"name_prefix"`
			TaskID     string   `query:"task_id"`
			Label      []string `query:"label,explode" doc:"KEY=VALUE; repeat for more (every pair must match)."`
			Labels     string   `query:"labels" doc:"The pairs as a JSON object, for keys that hold an =."`
			After      string   `query:"after" doc:"The next cursor of the previous page."`
			Limit      int      `query:"limit" minimum:"0" maximum:"1000"`
		}) (*struct{ Body workspace.ArtifactPage }, error) {
			labels, err := labelsQuery(in.Label, in.Labels)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			p, err := s.ws.Artifacts().List(ctx, workspace.ArtifactFilter{Kind: in.Kind, Owner: in.Owner, NamePrefix: in.NamePrefix, TaskID: in.TaskID, Labels: labels, After: in.After, Limit: in.Limit})
			return answer(s, ctx, &struct{ Body workspace.ArtifactPage }{p}, err)
		})

	huma.Register(s.api, s.op("getArtifact", http.MethodGet, "/v1/artifacts/{ref}", "Get an artifact's head (or a version) with its content", "artifacts", 0),
		func(ctx context.Context, in *struct {
			ArtifactPath
			Version int64 `query:"version" minimum:"0" doc:"A version (default: the head)."`
		}) (*artifactOut, error) {
			ref := in.ref()
			ref.Version = in.Version
			a, err := s.ws.Artifacts().Get(ctx, ref)
			return answer(s, ctx, &artifactOut{a}, err)
		})

	update := s.op("updateArtifact", http.MethodPatch, "/v1/artifacts/{ref}", "Write a new version from the head and a change", "artifacts", 0)
	// The body checks itself in the one pass that decodes it (decode.go).
	update.SkipValidateBody = true
	huma.Register(s.api, update,
		func(ctx context.Context, in *struct {
			ArtifactPath
			Body changeBody
		}) (*artifactOut, error) {
			w, err := s.write(ctx, in.Body.WriteFields)
			if err != nil {
				return nil, err
			}
			c, err := in.Body.Change()
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			a, err := s.ws.Artifacts().Update(ctx, w, in.ref(), c)
			return answer(s, ctx, &artifactOut{a}, err)
		})

	huma.Register(s.api, s.op("deleteArtifact", http.MethodDelete, "/v1/artifacts/{ref}", "Delete an artifact from the live set", "artifacts", http.StatusNoContent),
		func(ctx context.Context, in *struct {
			ArtifactPath
			wire.WriteQuery
		}) (*struct{}, error) {
			w, err := s.write(ctx, in.Fields())
			if err != nil {
				return nil, err
			}
			return answer(s, ctx, &struct{}{}, s.ws.Artifacts().Delete(ctx, w, in.ref()))
		})

	huma.Register(s.api, s.op("rollbackArtifact", http.MethodPost, "/v1/artifacts/{ref}/rollback", "Write a new head from an old version", "artifacts", 0),
		func(ctx context.Context, in *struct {
			ArtifactPath
			Body wire.RollbackBody
		}) (*artifactOut, error) {
			w, err := s.write(ctx, in.Body.WriteFields)
			if err != nil {
				return nil, err
			}
			a, err := s.ws.Artifacts().Rollback(ctx, w, in.ref(), in.Body.To)
			return answer(s, ctx, &artifactOut{a}, err)
		})

	type versions struct {
		Versions []workspace.Artifact `json:"versions"`
	}
	huma.Register(s.api, s.op("artifactVersions", http.MethodGet, "/v1/artifacts/{ref}/versions", "List every version's metadata, oldest first", "artifacts", 0),
		func(ctx context.Context, in *struct{ ArtifactPath }) (*struct{ Body versions }, error) {
			vs, err := s.ws.Artifacts().Versions(ctx, in.ref())
			if vs == nil {
				vs = []workspace.Artifact{}
			}
			return answer(s, ctx, &struct{ Body versions }{versions{vs}}, err)
		})
}
