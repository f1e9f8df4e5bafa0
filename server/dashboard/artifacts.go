package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/agentspace/agentspace/internal/linediff"
	"github.com/agentspace/agentspace/workspace"
)

// maxShown is the largest content the artifact view renders inline;
// larger content is a download.
const maxShown = 1 << 20

// maxTreeNames bounds how many names under a prefix the tree reads.
const maxTreeNames = 20_000

// md renders markdown without raw HTML: goldmark drops HTML blocks and
// inline HTML, and links to javascript: and other dangerous URLs, unless
// told otherwise.
var md = sync.OnceValue(func() goldmark.Markdown { return goldmark.New(goldmark.WithExtensions(extension.GFM)) })

type folder struct {
	Name   string // the folder's full prefix, ending in "/"
	Label  string // its last segment
	Count  int
	Prefix string
}

type crumb struct{ Label, Prefix string }

type treeView struct {
	Prefix     string
	Crumbs     []crumb
	Folders    []folder
	Files      []workspace.Artifact
	Total      int
	Truncated  bool
	Prev, Next string
}

func (h *Handler) loadArtifacts(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	q := r.URL.Query()
	prefix := q.Get("prefix")
	if len(prefix) > workspace.MaxNameLen {
		return nil, invalid("prefix: longer than %d bytes", workspace.MaxNameLen)
	}
	page, err := pageNumber(q)
	if err != nil {
		return nil, err
	}
	v := treeView{Prefix: prefix}
	acc := ""
	for _, seg := range strings.SplitAfter(prefix, "/") {
		if seg == "" {
			continue
		}
		acc += seg
		v.Crumbs = append(v.Crumbs, crumb{Label: strings.TrimSuffix(seg, "/"), Prefix: acc})
	}
	folders := map[string]int{}
	f := workspace.ArtifactFilter{NamePrefix: prefix, Limit: 1000}
	var files []workspace.Artifact
	n := 0
	for {
		p, err := h.ws.Artifacts().List(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, a := range p.Artifacts {
			n++
			rest := strings.TrimPrefix(a.Name, prefix)
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				folders[rest[:i+1]]++
			} else {
				files = append(files, a)
			}
		}
		if p.Next == "" {
			break
		}
		if n >= maxTreeNames {
			v.Truncated = true
			break
		}
		f.After = p.Next
	}
	for name, c := range folders {
		v.Folders = append(v.Folders, folder{Name: prefix + name, Label: strings.TrimSuffix(name, "/"), Count: c, Prefix: prefix + name})
	}
	sort.Slice(v.Folders, func(i, j int) bool { return v.Folders[i].Name < v.Folders[j].Name })
	v.Total = len(files)
	size := h.opts.PageSize * 4
	lo := min((page-1)*size, len(files))
	hi := min(lo+size, len(files))
	v.Files = files[lo:hi]
	link := func(n int) string {
		u := url.Values{"page": {itoa(n)}}
		if prefix != "" {
			u.Set("prefix", prefix)
		}
		return "/ui/artifacts?" + u.Encode()
	}
	if hi < len(files) {
		v.Next = link(page + 1)
	}
	if page > 1 {
		v.Prev = link(page - 1)
	}
	return v, nil
}

// version is one row of an artifact's history.
type version struct {
	workspace.Artifact
	Message string
}

type artifactView struct {
	A        workspace.Artifact
	Head     int64
	Versions []version // newest first
	// One of these holds the content as shown.
	Markdown template.HTML
	Text     string
	Lines    int
	Binary   bool
	TooLarge bool
	Lang     string
	Code     template.HTML // Text, escaped, with token spans (highlight.go)
}

func artifactRef(q url.Values, version string) (workspace.ArtifactRef, error) {
	name := q.Get("name")
	if name == "" {
		return workspace.ArtifactRef{}, invalid("name: missing")
	}
	if err := workspace.ValidateName(name); err != nil {
		return workspace.ArtifactRef{}, invalid("name %q: %v", truncate(name, 64), err)
	}
	ref := workspace.ByName(name)
	if s := q.Get(version); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return ref, invalid("%s %q: want a version number", version, truncate(s, 32))
		}
		ref.Version = n
	}
	return ref, nil
}

func (h *Handler) loadArtifact(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	ref, err := artifactRef(r.URL.Query(), "v")
	if err != nil {
		return nil, err
	}
	a, err := h.ws.Artifacts().Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	vs, err := h.ws.Artifacts().Versions(ctx, workspace.ByID(a.ID))
	if err != nil {
		return nil, err
	}
	msgs, err := h.versionMessages(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	v := artifactView{A: a}
	for i := len(vs) - 1; i >= 0; i-- {
		v.Versions = append(v.Versions, version{Artifact: vs[i], Message: msgs[vs[i].Version]})
		v.Head = max(v.Head, vs[i].Version)
	}
	switch {
	case !isText(a.Content):
		v.Binary = true
	case len(a.Content) > maxShown:
		v.TooLarge = true
	case isMarkdown(a):
		var b bytes.Buffer
		if err := md().Convert(a.Content, &b); err != nil {
			return nil, fmt.Errorf("rendering %s as markdown: %w", a.Name, err)
		}
		// goldmark rendered it without raw HTML or dangerous links.
		v.Markdown = template.HTML(b.String()) // #nosec G203 -- goldmark's safe mode
	default:
		v.Text = string(a.Content)
		v.Lines = strings.Count(v.Text, "\n")
		v.Lang = strings.TrimPrefix(path.Ext(a.Name), ".")
		v.Code = highlight(v.Lang, v.Text)
	}
	return v, nil
}

// versionMessages maps each version of an artifact to the message its
// event carries.
func (h *Handler) versionMessages(ctx context.Context, id string) (map[int64]string, error) {
	out := map[int64]string{}
	q := workspace.EventQuery{SubjectKind: workspace.SubjectArtifact, SubjectID: id, Limit: 1000}
	for {
		p, err := h.ws.Events().Read(ctx, q)
		if err != nil {
			// A compacted log leaves the messages out, not the page.
			if errorsIsCompacted(err) {
				return out, nil
			}
			return nil, err
		}
		for _, e := range p.Events {
			if e.Type != workspace.EventConflict && e.Message != "" {
				out[e.Version] = e.Message
			}
		}
		if len(p.Events) == 0 || p.Next <= q.AfterSeq {
			return out, nil
		}
		q.AfterSeq = p.Next
	}
}

func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

func isMarkdown(a workspace.Artifact) bool {
	ct, _, _ := mime.ParseMediaType(a.ContentType)
	if ct == "text/markdown" || ct == "text/x-markdown" {
		return true
	}
	switch strings.ToLower(path.Ext(a.Name)) {
	case ".md", ".markdown":
		return ct == "" || ct == "application/octet-stream" || strings.HasPrefix(ct, "text/")
	}
	return false
}

// artifactRaw sends one version's content as a download, never as a page
// of this site: whatever it holds cannot run here.
func (h *Handler) artifactRaw(w http.ResponseWriter, r *http.Request) {
	_, r, ok := h.reader(w, r, false)
	if !ok {
		return
	}
	ref, err := artifactRef(r.URL.Query(), "v")
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	a, err := h.ws.Artifacts().Get(r.Context(), ref)
	if err != nil {
		if errors.Is(err, workspace.ErrForbidden) {
			h.fail(w, r, http.StatusForbidden, err.Error())
			return
		}
		if isUserError(err) {
			h.fail(w, r, http.StatusNotFound, err.Error())
			return
		}
		h.internal(w, r, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fmt.Sprintf("%s@%d", path.Base(a.Name), a.Version)}))
	hd.Set("Content-Length", strconv.Itoa(len(a.Content)))
	_, _ = w.Write(a.Content)
}

// diffLine is one line of the diff view.
type diffLine struct {
	Op   string // "eq", "del", "ins"
	A, B int    // 1-based line numbers; 0 where the line is not on that side
	Text string
}

type diffView struct {
	Name      string
	From, To  workspace.Artifact
	Versions  []int64
	Lines     []diffLine
	Binary    bool
	Identical bool
	Added     int
	Removed   int
}

// loadDiff compares versions a and b of an artifact (default: the one
// before the head and the head), with the line diff wsctl artifact diff
// uses.
func (h *Handler) loadDiff(ctx context.Context, r *http.Request, _ Identity) (any, error) {
	q := r.URL.Query()
	refA, err := artifactRef(q, "a")
	if err != nil {
		return nil, err
	}
	refB, err := artifactRef(q, "b")
	if err != nil {
		return nil, err
	}
	vs, err := h.ws.Artifacts().Versions(ctx, workspace.ByName(refA.Name))
	if err != nil {
		return nil, err
	}
	v := diffView{Name: refA.Name}
	for _, x := range vs {
		v.Versions = append(v.Versions, x.Version)
	}
	head := vs[len(vs)-1].Version
	if refB.Version == 0 {
		refB.Version = head
	}
	if refA.Version == 0 {
		refA.Version = max(refB.Version-1, 1)
	}
	if v.From, err = h.ws.Artifacts().Get(ctx, refA); err != nil {
		return nil, err
	}
	if v.To, err = h.ws.Artifacts().Get(ctx, refB); err != nil {
		return nil, err
	}
	v.Identical = v.From.SHA256 == v.To.SHA256
	if !isText(v.From.Content) || !isText(v.To.Content) {
		v.Binary = true
		return v, nil
	}
	v.Lines, v.Added, v.Removed = lineDiff(v.From.Content, v.To.Content)
	return v, nil
}

// lineDiff is the line diff of two texts, as the diff view shows it.
func lineDiff(a, b []byte) (lines []diffLine, added, removed int) {
	la, lb := linediff.Split(string(a)), linediff.Split(string(b))
	for _, e := range linediff.Lines(la, lb) {
		switch e.Kind {
		case linediff.Equal:
			lines = append(lines, diffLine{Op: "eq", A: e.A + 1, B: e.B + 1, Text: la[e.A]})
		case linediff.Delete:
			lines = append(lines, diffLine{Op: "del", A: e.A + 1, Text: la[e.A]})
			removed++
		case linediff.Insert:
			lines = append(lines, diffLine{Op: "ins", B: e.B + 1, Text: lb[e.B]})
			added++
		}
	}
	return lines, added, removed
}
