#!/usr/bin/env bash
# Known vulnerabilities in our dependencies and the Go standard library, as
# reachable from our code: govulncheck against vuln.go.dev. Needs network
# access to vuln.go.dev (so it is not part of .ci/run, whose machine has
# none); run it before a release and when a dependency changes. Pinned to
# v1.8.0: v1.9.0 needs a golang.org/x/telemetry version our proxy refuses.
set -euo pipefail
cd "$(dirname "$0")/.."
go run golang.org/x/vuln/cmd/govulncheck@v1.8.0 "$@" ./...
