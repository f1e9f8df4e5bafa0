// Command onlybackend links a backend and the user API and nothing that
// owns a reserved kind: it tries to read, list and write the server's
// token notes and gitwork's worktree records in the store its first
// argument names, and prints one line per attempt.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

func main() {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, os.Args[1], workspace.Options{MustExist: true})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	defer ws.Close()
	say := func(what string, err error) {
		var fe *workspace.ForbiddenError
		switch {
		case errors.As(err, &fe):
			fmt.Printf("%s: forbidden\n", what)
		case err != nil:
			fmt.Printf("%s: error %v\n", what, err)
		default:
			fmt.Printf("%s: allowed\n", what)
		}
	}
	_, err = ws.Notes().Get(ctx, "token", os.Args[2])
	say("get token", err)
	p, err := ws.Notes().List(ctx, workspace.NoteFilter{Kind: "token"})
	if err == nil && len(p.Notes) > 0 {
		err = nil
		fmt.Printf("list token: %d notes\n", len(p.Notes))
	} else {
		say("list token", err)
	}
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "mallory"}, workspace.NotePut{Kind: "token", Key: "planted", Body: "{}"})
	say("put token", err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "mallory"}, workspace.NotePut{Kind: "worktree", Key: "planted", Body: "{}"})
	say("put worktree", err)
}
