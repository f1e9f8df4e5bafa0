package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/agentspace/agentspace/workspace"
)

// progressEvery is how many records pass between updates of a bar.
const progressEvery = 500

// progress is a bar on stderr for long work, with its rate and ETA. It is
// drawn only when stderr is a terminal and --quiet was not given: piped or
// redirected, wsctl adds nothing to stderr but errors.
type progress struct {
	bar *progressbar.ProgressBar
	w   io.Writer
}

// newProgress returns a bar for what, max units long (-1: unknown), in
// records or (bytes) in bytes; nil, which does nothing, off a terminal.
func (a *app) newProgress(what string, max int64, bytes, quiet bool) *progress {
	if quiet || !isTerminal(a.stderr) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription("wsctl: " + what),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(a.stderr) }),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionSetItsString("records"))
	}
	return &progress{bar: progressbar.NewOptions64(max, opts...), w: a.stderr}
}

// records returns the ArchiveOptions that move the bar by records.
func (p *progress) records() workspace.ArchiveOptions {
	if p == nil {
		return workspace.ArchiveOptions{}
	}
	return workspace.ArchiveOptions{
		ProgressEvery: progressEvery,
		Progress: func(s workspace.ArchiveStats) {
			n := s.Records()
			if max := p.bar.GetMax64(); max >= 0 && n > max {
				p.bar.ChangeMax64(n) // the estimate was short
			}
			_ = p.bar.Set64(n) // drawing to the terminal is best effort
		},
	}
}

// reader returns r, moving the bar by the bytes read from it.
func (p *progress) reader(r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	rd := progressbar.NewReader(r, p.bar)
	return &rd
}

// done finishes the bar, or, after a failure, ends its line so that the
// error starts on a line of its own.
func (p *progress) done(err error) {
	if p == nil {
		return
	}
	if err == nil {
		_ = p.bar.Finish()
		return
	}
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}

// exportSize estimates how many records an export of ws writes: every
// task, note and live lease, every event, and the versions of the live
// artifacts (deleted artifacts' versions are not counted: the bar grows
// if it meets them).
func exportSize(ctx context.Context, ws *workspace.Workspace) (int64, error) {
	st, err := ws.Status(ctx)
	if err != nil {
		return 0, err
	}
	n := int64(st.Notes) + int64(len(st.Locks))
	if st.Head >= st.Floor {
		n += st.Head - st.Floor + 1
	}
	for _, c := range st.Tasks {
		n += int64(c)
	}
	f := workspace.ArtifactFilter{Limit: 1000}
	for {
		page, err := ws.Artifacts().List(ctx, f)
		if err != nil {
			return 0, err
		}
		for _, x := range page.Artifacts {
			n += x.Version
		}
		if page.Next == "" {
			return n, nil
		}
		f.After = page.Next
	}
}

// inputSize is the size of r when it is a regular file, else -1.
func inputSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return -1
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	return fi.Size()
}
