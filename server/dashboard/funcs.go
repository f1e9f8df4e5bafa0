package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentspace/agentspace/workspace"
)

func itoa(n int) string { return strconv.Itoa(n) }

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func errorsIsCompacted(err error) bool { return errors.Is(err, workspace.ErrCompacted) }

// span writes a duration the way a person reads it: 45s, 12m, 3h, 2d.
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m" + strconv.Itoa(int(d.Seconds())%60) + "s"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h" + strconv.Itoa(int(d.Minutes())%60) + "m"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// funcs are the templates' helpers. Each returns plain strings, which
// html/template escapes for the context they land in.
var funcs = template.FuncMap{
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return span(max(now.Sub(t), 0)) + " ago"
	},
	"left": func(now, t time.Time) string {
		if !now.Before(t) {
			return "expired"
		}
		return span(t.Sub(now)) + " left"
	},
	"stamp": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"labels": func(m map[string]string) []string {
		out := make([]string, 0, len(m))
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		sort.Strings(out)
		return out
	},
	// query builds a query string from pairs; url.Values encodes it, so
	// it is safe to place after "?" in a URL attribute as it is.
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return template.URL(v.Encode()) // #nosec G203 -- url.Values.Encode escapes every byte that matters
	},
	"short":    func(id string) string { return truncate(id, 8) },
	"verdicts": verdicts,
	"itoa":     itoa,
	"list":     func(s ...string) []string { return s },
	"pair":     func(a, b any) []any { return []any{a, b} },
	"i64":      func(n int64) string { return strconv.FormatInt(n, 10) },
	"add":      func(a, b int) int { return a + b },
	"trimNL":   func(s string) string { return strings.TrimSuffix(s, "\n") },
	"bytes":    humanBytes,
	"eventOf":  func(e workspace.Event) string { return strings.SplitN(e.Type, ".", 2)[0] },
	"operator": func(id Identity) bool { return id.Operator() },
	"lapsed":   func(now, t time.Time) bool { return !t.IsZero() && !now.Before(t) },
	"visible":  visible,
}

func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}

// visible shows the invisible: format characters (bidi overrides and
// isolates, zero-width characters) and control characters other than
// tab and newline become "[U+202E]", so a name cannot reorder or hide the
// text drawn after it.
func visible(s string) string {
	clean := true
	for _, r := range s {
		if hidden(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hidden(r) {
			fmt.Fprintf(&b, "[U+%04X]", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hidden(r rune) bool {
	return (unicode.Is(unicode.Cf, r) || unicode.IsControl(r)) && r != '\t' && r != '\n'
}
