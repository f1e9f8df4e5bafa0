package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// defaultConfigFile is looked for in the working directory and its parents.
const defaultConfigFile = "agentspace.toml"

// defaultStoreDir is the directory of the default store, DefaultDSN's.
const defaultStoreDir = ".agentspace"

// fileConfig is agentspace.toml:
//
//	default_env = "dev"              # optional: the env used without --env / AGENTSPACE_ENV
//	dsn = "sqlite:team.db"           # optional: the DSN used when no env is picked
//
//	[env.dev]
//	dsn = "sqlite:.agentspace/workspace.db"
//
//	[env.prod]
//	dsn = "postgres://agent@db.internal/agentspace?sslmode=require"
type fileConfig struct {
	DefaultEnv string               `toml:"default_env"`
	DSN        string               `toml:"dsn"`
	Env        map[string]envConfig `toml:"env"`
	Shadow     shadowConfig         `toml:"shadow"`    // see shadow.go
	Work       workConfig           `toml:"work"`      // wsctl work: see work.go
	Merge      mergeConfig          `toml:"merge"`     // wsctl merge: see work.go
	Retention  retentionConfig      `toml:"retention"` // see gc.go
}

type envConfig struct {
	DSN string `toml:"dsn"`
}

// resolution is which DSN won, and why.
type resolution struct {
	DSN        string `json:"dsn"` // redacted when shown
	Source     string `json:"source"`
	Env        string `json:"env,omitempty"`
	ConfigFile string `json:"config_file,omitempty"`
}

// resolve applies the precedence: --dsn, AGENTSPACE_DSN (or its alias
// AGENTSPACE_URL), the config file's
// environment (--env, AGENTSPACE_ENV, default_env) or top-level dsn, then
// workspace.DefaultDSN. Without --config, the config file and the default
// store are looked for as git looks for .git: in the working directory,
// then in each parent up to the filesystem root, the nearest winning.
func (a *app) resolve() (resolution, error) {
	if a.dsnFlag != "" {
		return resolution{DSN: a.dsnFlag, Source: "--dsn flag"}, nil
	}
	if v := a.getenv("AGENTSPACE_DSN"); v != "" {
		return resolution{DSN: v, Source: "AGENTSPACE_DSN"}, nil
	}
	// The clients' older name for a server's URL, kept as an alias.
	if v := a.getenv("AGENTSPACE_URL"); v != "" {
		return resolution{DSN: v, Source: "AGENTSPACE_URL (an alias of AGENTSPACE_DSN)"}, nil
	}
	envName, envSource := a.envFlag, "--env"
	if envName == "" {
		envName, envSource = a.getenv("AGENTSPACE_ENV"), "AGENTSPACE_ENV"
	}
	path, explicit := a.configFlag, true
	def := resolution{DSN: workspace.DefaultDSN, Source: "default (no --dsn, AGENTSPACE_DSN or " + defaultConfigFile + ")"}
	if a.workDir != "" {
		def.DSN = "sqlite:" + filepath.Join(a.workDir, strings.TrimPrefix(workspace.DefaultDSN, "sqlite:"))
	}
	if path == "" {
		explicit = false
		found, err := findUpFrom(a.workDir)
		if err != nil {
			return resolution{}, err
		}
		switch {
		case found.config != "":
			path = found.config
		case found.storeDir != "":
			def = resolution{
				DSN:    "sqlite:" + filepath.Join(found.storeDir, filepath.Base(strings.TrimPrefix(workspace.DefaultDSN, "sqlite:"))),
				Source: "default, in the nearest parent directory holding " + defaultStoreDir + "/",
			}
		}
		if path == "" {
			path = defaultConfigFile
		}
	}
	cfg, err := readConfig(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		if envName != "" {
			return resolution{}, usageErrorf("environment %q was asked for (%s) but there is no %s here or in a parent directory: create it or pass --config FILE", envName, envSource, defaultConfigFile)
		}
		return def, nil
	case errors.Is(err, fs.ErrNotExist):
		return resolution{}, usageErrorf("config file %s does not exist", path)
	case err != nil:
		return resolution{}, usageErrorf("%v", err)
	}
	if envName == "" && cfg.DefaultEnv != "" {
		envName, envSource = cfg.DefaultEnv, "default_env"
	}
	if envName != "" {
		e, ok := cfg.Env[envName]
		if !ok {
			return resolution{}, usageErrorf("%s has no [env.%s] (from %s); it has: %s", path, envName, envSource, envNames(cfg))
		}
		if e.DSN == "" {
			return resolution{}, usageErrorf("%s: [env.%s] has no dsn", path, envName)
		}
		return resolution{DSN: anchor(e.DSN, path), Source: fmt.Sprintf("%s [env.%s] (picked by %s)", path, envName, envSource), Env: envName, ConfigFile: path}, nil
	}
	if cfg.DSN != "" {
		return resolution{DSN: anchor(cfg.DSN, path), Source: path + " (top-level dsn)", ConfigFile: path}, nil
	}
	// The default store beside the file, as a dsn in it would be: the same
	// from every directory below it (a worktree under .agentspace/ too).
	return resolution{DSN: anchor(workspace.DefaultDSN, path), Source: "default (" + path + " names no dsn; pick an env with --env or AGENTSPACE_ENV)", ConfigFile: path}, nil
}

// discovery is what findUp found: the nearest config file, or else the
// nearest default store directory (both "" if neither).
type discovery struct {
	config   string
	storeDir string
}

// findUp is findUpFrom the working directory.
func findUp() (discovery, error) { return findUpFrom("") }

// findUpFrom looks in start (the working directory when "") and then each
// parent for agentspace.toml or .agentspace/; the nearest directory holding
// either wins, and in one directory the config file wins. Paths are
// returned relative to the working directory when found there, with start
// prepended otherwise.
func findUpFrom(start string) (discovery, error) {
	wd, err := os.Getwd()
	if err != nil {
		return discovery{}, fmt.Errorf("working directory: %w", err)
	}
	from := wd
	if start != "" {
		if from, err = filepath.Abs(start); err != nil {
			return discovery{}, err
		}
	}
	for dir := from; ; {
		rel := func(name string) string {
			switch {
			case dir == wd:
				return name
			case dir == from:
				return filepath.Join(start, name)
			}
			return filepath.Join(dir, name)
		}
		if fi, err := os.Stat(filepath.Join(dir, defaultConfigFile)); err == nil && !fi.IsDir() {
			return discovery{config: rel(defaultConfigFile)}, nil
		}
		if fi, err := os.Stat(filepath.Join(dir, defaultStoreDir)); err == nil && fi.IsDir() {
			return discovery{storeDir: rel(defaultStoreDir)}, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return discovery{}, nil
		}
		dir = parent
	}
}

// anchor makes a relative file path in a sqlite: or json: DSN from the
// config file at configPath relative to that file's directory, so that the
// file means the same store from whichever directory wsctl runs in.
func anchor(dsn, configPath string) string {
	dir := filepath.Dir(configPath)
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok || dir == "." || strings.HasPrefix(rest, "//") {
		return dsn
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "json":
	default:
		return dsn
	}
	p, query, hasQuery := strings.Cut(rest, "?")
	if p == "" || filepath.IsAbs(p) {
		return dsn
	}
	out := scheme + ":" + filepath.Join(dir, p)
	if hasQuery {
		out += "?" + query
	}
	return out
}

func readConfig(path string) (fileConfig, error) {
	var cfg fileConfig
	b, err := os.ReadFile(path) // #nosec G304 -- the config file the user named with --config (or agentspace.toml)
	if err != nil {
		return cfg, err
	}
	md, err := toml.Decode(string(b), &cfg)
	if err != nil {
		return cfg, fmt.Errorf("config file %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return cfg, fmt.Errorf("config file %s: unknown keys %s (known: default_env, dsn, [env.NAME] dsn, [shadow] (docs/shadows.md), [work] and [merge] (docs/worktrees.md), [retention] (docs/retention.md))", path, strings.Join(keys, ", "))
	}
	return cfg, nil
}

func envNames(cfg fileConfig) string {
	if len(cfg.Env) == 0 {
		return "no environments"
	}
	return strings.Join(slices.Sorted(maps.Keys(cfg.Env)), ", ")
}

func (a *app) configCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Show which workspace DSN and actor are used, and why",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			res, err := a.resolve()
			if err != nil {
				return err
			}
			res.DSN = workspace.RedactDSN(res.DSN)
			actor, actorSource := a.actorFlag, "--as flag"
			if actor == "" {
				actor, actorSource = a.getenv("AGENTSPACE_ACTOR"), "AGENTSPACE_ACTOR"
			}
			if actor == "" {
				actorSource = "none: set --as or AGENTSPACE_ACTOR to write"
			}
			schemes := driver.Schemes()
			if a.jsonOut {
				return a.printJSON(struct {
					resolution
					Actor       string   `json:"actor"`
					ActorSource string   `json:"actor_source"`
					Schemes     []string `json:"schemes"`
				}{res, actor, actorSource, schemes})
			}
			tw := a.table()
			fmt.Fprintf(tw, "dsn:\t%s\n", res.DSN)
			fmt.Fprintf(tw, "source:\t%s\n", res.Source)
			if actor != "" {
				fmt.Fprintf(tw, "actor:\t%s (%s)\n", actor, actorSource)
			} else {
				fmt.Fprintf(tw, "actor:\t%s\n", actorSource)
			}
			fmt.Fprintf(tw, "schemes:\t%s\n", strings.Join(schemes, ", "))
			return tw.Flush()
		}),
	}
}
