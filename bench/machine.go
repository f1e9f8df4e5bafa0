package bench

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Machine says where a run measured: what a reader needs before comparing
// its figures with another machine's. Fields that cannot be read here are
// empty (or zero).
type Machine struct {
	// CPU is the processor's model name, with "(virtual machine)" when
	// the CPU reports a hypervisor.
	CPU string `json:"cpu"`
	// Cores is the number of logical CPUs the process may use.
	Cores int `json:"cores"`
	// MemoryGiB is the machine's RAM.
	MemoryGiB float64 `json:"memory_gib,omitempty"`
	// OS is GOOS/GOARCH; Kernel the kernel's release.
	OS     string `json:"os"`
	Kernel string `json:"kernel,omitempty"`
	// Go is the Go version the benchmark was built with.
	Go string `json:"go"`
	// Storage is the file system and device of the directory the file
	// stores (SQLite, json) were made in: "ext4 on /dev/vda".
	Storage string `json:"storage,omitempty"`
	// Postgres is the server's version, where it runs and the settings
	// that decide a commit's cost.
	Postgres string `json:"postgres,omitempty"`
	// LoadBefore and LoadAfter are the one-minute load average when the
	// run began and when it ended (Linux): how busy the machine was.
	LoadBefore float64 `json:"load_before,omitempty"`
	LoadAfter  float64 `json:"load_after,omitempty"`
}

// String is the machine in one sentence, as the docs head a table with.
func (m Machine) String() string {
	var parts []string
	cpu := m.CPU
	if cpu == "" {
		cpu = "an unknown CPU"
	}
	parts = append(parts, fmt.Sprintf("%s, %d logical CPUs", cpu, m.Cores))
	if m.MemoryGiB > 0 {
		parts = append(parts, fmt.Sprintf("%.0f GiB RAM", m.MemoryGiB))
	}
	sys := m.OS
	if m.Kernel != "" {
		sys += " (kernel " + m.Kernel + ")"
	}
	parts = append(parts, sys, m.Go)
	if m.Storage != "" {
		parts = append(parts, "SQLite and json on "+m.Storage)
	}
	if m.Postgres != "" {
		parts = append(parts, m.Postgres)
	}
	s := strings.Join(parts, "; ")
	if m.LoadBefore > 0 || m.LoadAfter > 0 {
		s += fmt.Sprintf("; load average %.1f when the run began, %.1f when it ended", m.LoadBefore, m.LoadAfter)
	}
	return s
}

// DescribeMachine reads what it can of this machine: the processor, its
// memory, the kernel, the file system of dir (where file stores go) and,
// if pgDSN is not empty, the Postgres server it names.
func DescribeMachine(ctx context.Context, dir, pgDSN string) Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	m.CPU, m.MemoryGiB, m.Kernel = hostInfo()
	if dir != "" {
		m.Storage = storageOf(dir)
	}
	m.LoadBefore = loadAverage()
	if pgDSN != "" {
		m.Postgres = describePostgres(ctx, pgDSN)
	}
	return m
}

// describePostgres names the server's version, its host and the settings
// that decide what a commit costs; "" when it cannot be reached.
func describePostgres(ctx context.Context, dsn string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(pgOnly(dsn))
	if err != nil {
		return ""
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return ""
	}
	defer func() { _ = conn.Close(context.Background()) }()
	show := func(name string) string {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return "?"
		}
		return v
	}
	version, _, _ := strings.Cut(show("server_version"), " ")
	return fmt.Sprintf("PostgreSQL %s at %s:%d (synchronous_commit %s, fsync %s, autovacuum %s)",
		version, cfg.Host, cfg.Port, show("synchronous_commit"), show("fsync"), show("autovacuum"))
}

// pgOnly drops the DSN's ws_ parameters, which are ours, not the server's.
func pgOnly(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "ws_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
