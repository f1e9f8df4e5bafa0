package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// CompareConfig is what Compare measures: the same workloads run by two
// wsctl binaries in turn, each run on a fresh store, so that a change is
// judged against the build before it under the same noise.
type CompareConfig struct {
	// Old and New are the two wsctl executables (New: usually this one).
	Old, New string
	// DSN names the backend. Every run gets a fresh store of its kind:
	// a file or directory next to DSN's (SQLite, json), or a schema of
	// its Postgres database, removed after the run.
	DSN string
	// Workloads are run one at a time, each by both binaries in a round
	// (default W1 to W7).
	Workloads []string
	// Rounds is how many times each workload runs on each binary
	// (default 3). The binaries alternate, and so does which goes first.
	Rounds int
	// Args are further `wsctl bench` flags both binaries get:
	// --duration, --concurrency, --serve unix and the like.
	Args []string
	// Progress, if set, gets a line per run.
	Progress io.Writer
}

// Comparison is one row as both binaries measured it, round by round.
type Comparison struct {
	// Workload, Variant, Backend and Concurrency name the row, as in Row.
	Workload    string `json:"workload"`
	Variant     string `json:"variant,omitempty"`
	Backend     string `json:"backend"`
	Concurrency int    `json:"concurrency"`
	// Figure is what is compared: "ops/s" (higher is better), "p50"
	// (latency rows, lower is better; "p99" where a p50 was 0, the event
	// having come before the commit's answer), "heap" (memory rows,
	// lower).
	Figure string `json:"figure"`
	// Old and New are the figure on each binary, round by round.
	Old []float64 `json:"old"`
	New []float64 `json:"new"`
	// Speed is each round's new against old, above 1 when the new
	// binary did better (new/old for ops/s, old/new for the others); a
	// round where either figure is 0 has none.
	Speed []float64 `json:"speed"`
}

// Verdict is "slower" when the new binary did worse in every round,
// "faster" when better in every round, "level" otherwise, and "-" when
// no round could be compared.
func (c Comparison) Verdict() string {
	if len(c.Speed) == 0 {
		return "-"
	}
	switch {
	case slices.Max(c.Speed) < 1:
		return "slower"
	case slices.Min(c.Speed) > 1:
		return "faster"
	}
	return "level"
}

// compareWorkloads are Compare's default workloads.
var compareWorkloads = []string{"W1", "W2", "W3", "W4", "W5", "W6", "W7"}

// Compare runs each workload Rounds times on each binary, alternating
// (old then new in even rounds, new then old in odd ones), each run a
// `wsctl bench --json` of one workload on a fresh store, and pairs their
// rows round by round.
func Compare(ctx context.Context, cfg CompareConfig) ([]Comparison, error) {
	if len(cfg.Workloads) == 0 {
		cfg.Workloads = compareWorkloads
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 3
	}
	scheme, rest, _ := strings.Cut(cfg.DSN, ":")
	backend := backendOf(scheme)
	dir := ""
	if backend == "sqlite" || backend == "json" {
		path, _, _ := strings.Cut(rest, "?")
		dir = filepath.Dir(strings.TrimPrefix(path, "//"))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
	}
	var (
		out   []Comparison
		index = map[string]int{}
		// p99s are latency rows' p99s, old and new, for rows whose p50
		// is 0 in some run (the event came before the commit's answer).
		p99s = map[int]*[2][]float64{}
	)
	total, n := cfg.Rounds*len(cfg.Workloads)*2, 0
	for round := range cfg.Rounds {
		for _, w := range cfg.Workloads {
			sides := []struct {
				exe string
				new bool
			}{{cfg.Old, false}, {cfg.New, true}}
			if round%2 == 1 {
				slices.Reverse(sides)
			}
			for _, side := range sides {
				n++
				if cfg.Progress != nil {
					which := "old"
					if side.new {
						which = "new"
					}
					fmt.Fprintf(cfg.Progress, "\r\033[Kcompare: %d/%d: %s, round %d, %s", n, total, w, round+1, which)
				}
				rows, err := compareRun(ctx, side.exe, backend, cfg.DSN, dir, w, cfg.Args)
				if err != nil {
					return out, err
				}
				for _, r := range rows {
					key := fmt.Sprintf("%s\x00%s\x00%s\x00%d", r.Workload, r.Variant, r.Backend, r.Concurrency)
					i, ok := index[key]
					if !ok {
						i = len(out)
						index[key] = i
						out = append(out, Comparison{Workload: r.Workload, Variant: r.Variant, Backend: r.Backend, Concurrency: r.Concurrency})
					}
					c := &out[i]
					fig, v := figure(r)
					c.Figure = fig
					if p99s[i] == nil {
						p99s[i] = new([2][]float64)
					}
					if side.new {
						c.New = append(c.New, v)
						p99s[i][1] = append(p99s[i][1], r.P99us)
					} else {
						c.Old = append(c.Old, v)
						p99s[i][0] = append(p99s[i][0], r.P99us)
					}
				}
			}
		}
	}
	if cfg.Progress != nil {
		fmt.Fprint(cfg.Progress, "\r\033[K")
	}
	for i := range out {
		c := &out[i]
		if c.Figure == "p50" && (slices.Contains(c.Old, 0) || slices.Contains(c.New, 0)) {
			c.Figure, c.Old, c.New = "p99", p99s[i][0], p99s[i][1]
		}
		for k := range min(len(c.Old), len(c.New)) {
			o, nw := c.Old[k], c.New[k]
			if o <= 0 || nw <= 0 {
				continue
			}
			if c.Figure == "ops/s" {
				c.Speed = append(c.Speed, nw/o)
			} else {
				c.Speed = append(c.Speed, o/nw)
			}
		}
	}
	return out, nil
}

// figure is what Compare compares of a row.
func figure(r Row) (string, float64) {
	switch {
	case strings.HasPrefix(r.Note, "latency:"):
		return "p50", r.P50us
	case r.OpsPerSec == 0 && r.HeapKiB != 0:
		return "heap", r.HeapKiB
	}
	return "ops/s", r.OpsPerSec
}

// compareRun runs exe's `bench --json` for one workload on a fresh store.
func compareRun(ctx context.Context, exe, backend, dsn, dir, workload string, args []string) ([]Row, error) {
	store, cleanup, err := freshStore(backend, dsn, dir, "bench_cmp")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	argv := append([]string{"--dsn", store, "bench", "--json", "--workloads", workload}, args...)
	cmd := exec.CommandContext(ctx, exe, argv...) // #nosec G204 -- the binaries the user named, our own arguments
	cmd.Env = append(os.Environ(), "AGENTSPACE_DSN=", "AGENTSPACE_ACTOR=", "AGENTSPACE_TOKEN=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		last := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexAny(last, "\r\n"); i >= 0 {
			last = last[i+1:]
		}
		return nil, fmt.Errorf("%s bench %s: %w: %s", exe, workload, err, last)
	}
	var rows []Row
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s bench %s: a line that is not a row: %w", exe, workload, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// WriteComparison writes comparisons for people: each row's figure on
// both binaries (medians over the rounds), the new one's speed (median,
// and its range over the rounds) and the verdict.
func WriteComparison(w io.Writer, cs []Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tBACKEND\tC\tFIGURE\tOLD\tNEW\tSPEED (NEW VS OLD)\tRANGE OVER ROUNDS\tVERDICT")
	for _, c := range cs {
		name := c.Workload
		if c.Variant != "" {
			name += " " + c.Variant
		}
		speed, spread := "-", "-"
		if len(c.Speed) > 0 {
			speed = fmt.Sprintf("%.2fx", median(c.Speed))
			spread = fmt.Sprintf("%.2f-%.2f", slices.Min(c.Speed), slices.Max(c.Speed))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", name, c.Backend, c.Concurrency, c.Figure,
			figureText(c.Figure, c.Old), figureText(c.Figure, c.New), speed, spread, c.Verdict())
	}
	return tw.Flush()
}

// figureText is the median of vs as the figure reads.
func figureText(fig string, vs []float64) string {
	if len(vs) == 0 {
		return "-"
	}
	m := median(vs)
	switch fig {
	case "p50", "p99":
		return FormatMicros(m)
	case "heap":
		return fmt.Sprintf("%.0f KiB", m)
	}
	return fmt.Sprintf("%.0f", m)
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
