package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// explainArgs wraps the argument check of every command below root that
// takes positional arguments, so that a wrong count names the missing (or
// extra) argument and shows the command's own usage line, instead of
// cobra's "accepts 1 arg(s), received 0".
func explainArgs(root *cobra.Command) {
	for _, c := range root.Commands() {
		explainArgs(c)
	}
	if root.HasSubCommands() || root.Args == nil || !root.HasParent() {
		return
	}
	check := root.Args
	root.Args = func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		if err == nil {
			return nil
		}
		required, optional, known := positionals(cmd.Use)
		usage := "usage: " + cmd.UseLine()
		name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
		switch {
		case known && len(args) < len(required):
			return usageErrorf("%s: missing %s; %s", name, strings.Join(required[len(args):], " "), usage)
		case known && len(args) > len(required)+optional:
			return usageErrorf("%s: unexpected argument %q; %s", name, args[len(required)+optional], usage)
		}
		return usageErrorf("%s: %v; %s", name, err, usage)
	}
}

// positionals reads the argument names from a Use line such as
// "diff NAME V1 [V2]" or "put KIND KEY --title T": the required names, and
// how many optional ("[X]") ones follow. Names stop at the first flag. An
// alternative ("(N | --all)") makes the count unknown (known is false).
func positionals(use string) (required []string, optional int, known bool) {
	fields := strings.Fields(use)
	for _, f := range fields[min(1, len(fields)):] {
		switch {
		case strings.HasPrefix(f, "("):
			return required, optional, false
		case strings.HasPrefix(f, "-"), strings.HasPrefix(f, "[-"):
			return required, optional, true
		case strings.HasPrefix(f, "["):
			optional++
		default:
			required = append(required, f)
		}
	}
	return required, optional, true
}
