package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	jsonstore "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/sqlite"
)

// buildInfo is what `wsctl version` reports.
type buildInfo struct {
	Version  string          `json:"version"`            // the module version, "(devel)" for a local build
	Commit   string          `json:"commit,omitempty"`   // vcs.revision, when built from a checkout
	Modified bool            `json:"modified,omitempty"` // the checkout had uncommitted changes
	Time     string          `json:"commit_time,omitempty"`
	Go       string          `json:"go"`
	Platform string          `json:"platform"`
	Schemas  map[string]uint `json:"schemas"` // the newest schema (or format) version each backend knows
}

// readBuildInfo reads the module version and VCS stamp the Go toolchain
// embeds in the binary.
func readBuildInfo() buildInfo {
	b := buildInfo{
		Version:  "(unknown)",
		Go:       runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Schemas: map[string]uint{
			"json":     jsonstore.LatestFormat(),
			"postgres": postgres.LatestVersion(),
			"sqlite":   sqlite.LatestVersion(),
		},
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "vcs.time":
			b.Time = s.Value
		}
	}
	return b
}

// String is the human form, as `wsctl version` and `wsctl --version` print it.
func (b buildInfo) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "wsctl %s", b.Version)
	if b.Commit != "" {
		fmt.Fprintf(&s, ", commit %s", b.Commit)
		if b.Modified {
			s.WriteString(" (modified)")
		}
		if b.Time != "" {
			fmt.Fprintf(&s, " of %s", b.Time)
		}
	}
	fmt.Fprintf(&s, "\n%s %s\n", b.Go, b.Platform)
	fmt.Fprintf(&s, "schema versions: json %d, postgres %d, sqlite %d\n", b.Schemas["json"], b.Schemas["postgres"], b.Schemas["sqlite"])
	return s.String()
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print wsctl's version, commit, Go version and the schema versions it knows",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			b := readBuildInfo()
			if a.jsonOut {
				return a.printJSON(b)
			}
			_, err := fmt.Fprint(a.stdout, b)
			return err
		}),
	}
}
