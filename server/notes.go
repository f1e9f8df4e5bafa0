package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// NotePath names a note.
type NotePath struct {
	Kind string `path:"kind" doc:"The note's kind (a lower-case word)."`
	Key  string `path:"key" doc:"The note's key, URL-escaped."`
}

type noteOut struct {
	Body workspace.Note
}

func (s *Server) noteRoutes() {
	put := s.op("putNote", http.MethodPut, "/v1/notes/{kind}/{key}", "Create or update a note", "notes", 0)
	put.SkipValidateBody = true // the body checks itself (decode.go)
	huma.Register(s.api, put,
		func(ctx context.Context, in *struct {
			NotePath
			Body noteBody
		}) (*noteOut, error) {
			w, err := s.write(ctx, in.Body.WriteFields)
			if err != nil {
				return nil, err
			}
			n, err := s.ws.Notes().Put(ctx, w, workspace.NotePut{Kind: in.Kind, Key: in.Key, Title: in.Body.Title, Body: in.Body.Body})
			return answer(s, ctx, &noteOut{n}, err)
		})

	huma.Register(s.api, s.op("getNote", http.MethodGet, "/v1/notes/{kind}/{key}", "Get a note", "notes", 0),
		func(ctx context.Context, in *struct{ NotePath }) (*noteOut, error) {
			n, err := s.ws.Notes().Get(ctx, in.Kind, in.Key)
			return answer(s, ctx, &noteOut{n}, err)
		})

	huma.Register(s.api, s.op("deleteNote", http.MethodDelete, "/v1/notes/{kind}/{key}", "Delete a note", "notes", http.StatusNoContent),
		func(ctx context.Context, in *struct {
			NotePath
			wire.WriteQuery
		}) (*struct{}, error) {
			w, err := s.write(ctx, in.Fields())
			if err != nil {
				return nil, err
			}
			return answer(s, ctx, &struct{}{}, s.ws.Notes().Delete(ctx, w, in.Kind, in.Key))
		})

	huma.Register(s.api, s.op("listNotes", http.MethodGet, "/v1/notes", "List notes by kind, then key", "notes", 0),
		func(ctx context.Context, in *struct {
			Kind  string `query:"kind"`
			After string `query:"after"`
			Limit int    `query:"limit" minimum:"0" maximum:"1000"`
		}) (*struct{ Body workspace.NotePage }, error) {
			// The engine leaves reserved kinds (the tokens among them) out
			// of a listing of every kind, and refuses a sealed kind's.
			p, err := s.ws.Notes().List(ctx, workspace.NoteFilter{Kind: in.Kind, After: in.After, Limit: in.Limit})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return &struct{ Body workspace.NotePage }{p}, nil
		})
}
