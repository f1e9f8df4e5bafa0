# Developer shortcuts. CI runs .ci/run, which uses the same scripts.
.PHONY: test lint vuln fuzz

# The README's test command.
test:
	go vet ./...
	go test -race -gcflags='modernc.org/...=-race=false' -count=1 -timeout 30m ./...

# staticcheck and gosec at pinned versions; fails on any finding.
lint:
	scripts/lint.sh

# govulncheck: needs network access to vuln.go.dev (not run in CI).
vuln:
	scripts/vuln.sh

# Fuzz each target for FUZZTIME (default 2m); new crashers land in testdata/fuzz.
FUZZTIME ?= 2m
fuzz:
	for t in FuzzValidateName FuzzParseDSN FuzzImport FuzzCommit; do \
		go test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./workspace || exit 1; \
	done
	for t in FuzzParseEvents FuzzDecodeJournal FuzzDecodeRecord; do \
		go test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./backend/json || exit 1; \
	done
