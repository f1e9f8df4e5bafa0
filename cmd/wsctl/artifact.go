package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/agentspace/agentspace/internal/printable"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/internal/linediff"
	"github.com/agentspace/agentspace/workspace"
)

func (a *app) artifactCmd() *cobra.Command {
	return group("artifact", "Versioned content: put, get, ls, log, diff, rollback, rm, pin, unpin",
		a.artifactPutCmd(),
		a.artifactGetCmd(),
		a.artifactLsCmd(),
		a.artifactLogCmd(),
		a.artifactDiffCmd(),
		a.artifactRollbackCmd(),
		a.artifactRmCmd(),
		a.artifactPinCmd(),
		a.artifactUnpinCmd(),
	)
}

// writeFlags are the conditions every single-record write takes.
type writeFlags struct {
	ifVersion int64
	fence     int64
	message   string
}

func (w *writeFlags) add(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&w.ifVersion, "if-version", 0, "fail with exit 3 unless the stored version is N")
	cmd.Flags().Int64Var(&w.fence, "fence", 0, "fencing token of your lock: fail with exit 4 if a newer one was issued")
	cmd.Flags().StringVarP(&w.message, "message", "m", "", "why: kept in the event log")
}

func (w *writeFlags) write(actor string) workspace.Write {
	return workspace.Write{Actor: actor, IfVersion: w.ifVersion, Fence: w.fence, Message: w.message}
}

func (a *app) artifactPutCmd() *cobra.Command {
	var (
		wf          writeFlags
		file        string
		kind        string
		contentType string
		labels      []string
		taskID      string
		create      bool
	)
	cmd := &cobra.Command{
		Use:   "put NAME",
		Short: "Create or update an artifact from --file or stdin; prints the new version",
		Long: `Create or update the artifact NAME with the content of --file (or stdin).
Prints the new version. With --if-version N the write happens only if the
artifact is at version N (exit 3 otherwise); with --new only if it does not
exist yet.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			lbl, err := parseLabels("label", labels)
			if err != nil {
				return err
			}
			if create && wf.ifVersion != 0 {
				return usageErrorf("--new and --if-version exclude each other")
			}
			content, err := a.readInput(file)
			if err != nil {
				return err
			}
			name := args[0]
			return a.with(ctx, func(ws *workspace.Workspace) error {
				w := wf.write(actor)
				mk := func() (workspace.Artifact, error) {
					// No --content-type: the engine infers it (mediatype.For).
					return ws.Artifacts().Create(ctx, w, workspace.NewArtifact{
						Name: name, Kind: kind, Content: content, ContentType: contentType, Labels: lbl, TaskID: taskID,
					})
				}
				ch := workspace.ArtifactChange{Content: content, Labels: lbl}
				if cmd.Flags().Changed("kind") {
					ch.Kind = &kind
				}
				if cmd.Flags().Changed("content-type") {
					ch.ContentType = &contentType
				}
				if cmd.Flags().Changed("task") {
					ch.TaskID = &taskID
				}
				up := func() (workspace.Artifact, error) {
					return ws.Artifacts().Update(ctx, w, workspace.ByName(name), ch)
				}
				var (
					art workspace.Artifact
					err error
				)
				switch {
				case create:
					art, err = mk()
				case wf.ifVersion != 0:
					art, err = up()
				default:
					// Update if it exists, else create; a concurrent create
					// between the two makes it an update after all.
					art, err = up()
					if errors.Is(err, workspace.ErrNotFound) {
						art, err = mk()
						if errors.Is(err, workspace.ErrAlreadyExists) {
							art, err = up()
						}
					}
				}
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(art)
				}
				_, err = fmt.Fprintln(a.stdout, art.Version)
				return err
			})
		}),
	}
	wf.add(cmd)
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "read the content from FILE (default: stdin)")
	f.StringVar(&kind, "kind", "", "kind: design, code, review, test, plan, output, or any lower-case word (default output)")
	f.StringVar(&contentType, "content-type", "", "media type (default: guessed from the name and content)")
	f.StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable; on update replaces all labels)")
	f.StringVar(&taskID, "task", "", "id of the task this artifact belongs to")
	f.BoolVar(&create, "new", false, "only create: exit 3 if the artifact exists")
	return cmd
}

// readInput reads file, or stdin when file is "" or "-".
func (a *app) readInput(file string) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if file == "" || file == "-" {
		if err := a.checkStdinPiped("pipe it in (echo hello | wsctl ...) or name a file (--file FILE, or --body-file FILE for notes)"); err != nil {
			return nil, err
		}
		b, err = io.ReadAll(a.stdin)
	} else {
		b, err = os.ReadFile(file) // #nosec G304 -- the input file the user named on the command line
		if err != nil {
			return nil, inputFileError(file, err)
		}
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

func (a *app) artifactGetCmd() *cobra.Command {
	var (
		version int64
		out     string
	)
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Write an artifact's content (the head, or --version N) to stdout",
		Long: `Write the content of the artifact NAME to stdout (or -o FILE), raw.
With --json, print the artifact with its content: as text when it is
UTF-8 ("content_encoding": "utf-8"), else in base64 ("base64").`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				art, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: args[0], Version: version})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(art)
				}
				if out != "" {
					return os.WriteFile(out, art.Content, 0o600) // the content may be private, like the workspace it came from
				}
				_, err = a.stdout.Write(art.Content)
				return err
			})
		}),
	}
	cmd.Flags().Int64Var(&version, "version", 0, "read version N instead of the head")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the content to FILE instead of stdout")
	return cmd
}

func (a *app) artifactLsCmd() *cobra.Command {
	var (
		f      workspace.ArtifactFilter
		labels []string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List live artifacts, ordered by name",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			lbl, err := parseLabels("label", labels)
			if err != nil {
				return err
			}
			f.Labels = lbl
			if limit < 0 {
				return usageErrorf("--limit %d is negative", limit)
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				all, err := listAll(limit, func(n int, after string) ([]workspace.Artifact, string, error) {
					f.Limit, f.After = n, after
					page, err := ws.Artifacts().List(ctx, f)
					return page.Artifacts, page.Next, err
				})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return printList(a, all)
				}
				tw := a.table()
				fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tSIZE\tUPDATED\tBY")
				for _, x := range all {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", x.Name, x.Version, x.Kind, x.Size, stamp(x.UpdatedAt), x.UpdatedBy)
				}
				return tw.Flush()
			})
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Kind, "kind", "", "only artifacts of this kind")
	fl.StringVar(&f.NamePrefix, "prefix", "", "only names starting with this prefix")
	fl.StringVar(&f.Owner, "owner", "", "only artifacts owned by this actor")
	fl.StringVar(&f.TaskID, "task", "", "only artifacts of this task")
	fl.StringArrayVar(&labels, "label", nil, "only artifacts with label KEY=VALUE (repeatable)")
	fl.IntVar(&limit, "limit", 0, "at most N (default: all)")
	return cmd
}

// pageSize is the page to ask for when limit (0: none) items are wanted
// and have items already.
// listAll reads pages from list until it has limit items (every item if
// limit is 0) or the listing ends.
func listAll[T any](limit int, list func(n int, after string) ([]T, string, error)) ([]T, error) {
	all := []T{}
	after := ""
	for {
		items, next, err := list(pageSize(limit, len(all)), after)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" || (limit > 0 && len(all) >= limit) {
			return all, nil
		}
		after = next
	}
}

func pageSize(limit, have int) int {
	const max = 1000
	if limit <= 0 {
		return max
	}
	return min(limit-have, max)
}

func (a *app) artifactLogCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "log NAME",
		Short: "List every version of an artifact, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				vs, err := ws.Artifacts().Versions(ctx, workspace.ByName(args[0]))
				if err != nil {
					return err
				}
				if a.jsonOut {
					return printList(a, vs)
				}
				msgs, err := versionMessages(ctx, ws, vs)
				if err != nil {
					return err
				}
				tw := a.table()
				fmt.Fprintln(tw, "VERSION\tSIZE\tSHA256\tKIND\tUPDATED\tBY\tMESSAGE")
				for _, v := range vs {
					fmt.Fprintf(tw, "%d\t%d\t%.12s\t%s\t%s\t%s\t%s\n", v.Version, v.Size, v.SHA256, v.Kind, stamp(v.UpdatedAt), v.UpdatedBy, orDash(oneLine(msgs[v.Version])))
				}
				return tw.Flush()
			})
		}),
	}
}

// versionMessages finds each version's message (the -m of the write that
// made it) in the event log: versions do not keep it. A version whose
// event was compacted away has none.
func versionMessages(ctx context.Context, ws *workspace.Workspace, vs []workspace.Artifact) (map[int64]string, error) {
	msgs := map[int64]string{}
	if len(vs) == 0 {
		return msgs, nil
	}
	q := workspace.EventQuery{
		SubjectKind: workspace.SubjectArtifact,
		SubjectID:   vs[0].ID,
		Types:       []string{workspace.EventArtifactCreated, workspace.EventArtifactUpdated, workspace.EventArtifactRolledBack},
		Limit:       1000,
	}
	for {
		page, err := ws.Events().Read(ctx, q)
		var compacted *workspace.CompactedError
		if errors.As(err, &compacted) && q.AfterSeq < compacted.Floor-1 {
			q.AfterSeq = compacted.Floor - 1 // the older events are gone: read what is left
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Events {
			msgs[ev.Version] = ev.Message
		}
		if page.Next >= page.Head {
			return msgs, nil
		}
		q.AfterSeq = page.Next
	}
}

// oneLine shows a message on one table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (a *app) artifactDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff NAME [V1 [V2]]",
		Short: "Show a unified diff between two versions (V2 defaults to the head; V1 to the one before it)",
		Args:  cobra.RangeArgs(1, 3),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			name := args[0]
			var v1, v2 int64
			var err error
			if len(args) >= 2 {
				if v1, err = parseVersion(args[1]); err != nil {
					return err
				}
			}
			if len(args) == 3 {
				if v2, err = parseVersion(args[2]); err != nil {
					return err
				}
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				to, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: name, Version: v2})
				if err != nil {
					return err
				}
				if v1 == 0 {
					// As git diff HEAD~1: the head against the version before it.
					if to.Version < 2 {
						return usageErrorf("%s has one version: nothing to diff it against", name)
					}
					v1 = to.Version - 1
				}
				from, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: name, Version: v1})
				if err != nil {
					return err
				}
				binary := !printable.IsText(from.Content) || !printable.IsText(to.Content)
				var diff string
				if !binary {
					diff = linediff.Unified(
						fmt.Sprintf("%s@%d", name, from.Version), fmt.Sprintf("%s@%d", name, to.Version),
						string(from.Content), string(to.Content), 3)
				}
				if a.jsonOut {
					return a.printJSON(struct {
						Name      string `json:"name"`
						From      int64  `json:"from"`
						To        int64  `json:"to"`
						Identical bool   `json:"identical"`
						Binary    bool   `json:"binary"`
						Diff      string `json:"diff"`
					}{name, from.Version, to.Version, from.SHA256 == to.SHA256, binary, diff})
				}
				switch {
				case from.SHA256 == to.SHA256:
					return nil
				case binary:
					_, err = fmt.Fprintf(a.stdout, "Binary versions %s@%d and %s@%d differ\n", name, from.Version, name, to.Version)
					return err
				}
				_, err = io.WriteString(a.stdout, diff)
				return err
			})
		}),
	}
}

func parseVersion(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 {
		return 0, usageErrorf("version %q: want a number from 1", s)
	}
	return v, nil
}

func (a *app) artifactRollbackCmd() *cobra.Command {
	var (
		wf writeFlags
		to int64
	)
	cmd := &cobra.Command{
		Use:   "rollback NAME --to N",
		Short: "Write a new head version with version N's content; prints the new version",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			if to < 1 {
				return usageErrorf("rollback needs --to N (a version from 1)")
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				art, err := ws.Artifacts().Rollback(ctx, wf.write(actor), workspace.ByName(args[0]), to)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(art)
				}
				_, err = fmt.Fprintln(a.stdout, art.Version)
				return err
			})
		}),
	}
	wf.add(cmd)
	cmd.Flags().Int64Var(&to, "to", 0, "the version whose content becomes the new head")
	return cmd
}

func (a *app) artifactRmCmd() *cobra.Command {
	var wf writeFlags
	cmd := &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete an artifact (its history stays in the log; the name becomes free)",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				if err := ws.Artifacts().Delete(ctx, wf.write(actor), workspace.ByName(args[0])); err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(workspace.Subject{Kind: workspace.SubjectArtifact, Name: args[0]})
				}
				return nil
			})
		}),
	}
	wf.add(cmd)
	return cmd
}
