#!/usr/bin/env bash
# Static checks, run by .ci/run and `make lint`: staticcheck and gosec, at
# pinned versions fetched through the module proxy. Any finding fails.
#
# gosec: v2.22.0 is the newest that builds here (its later releases need
# modules the proxy refuses). Test files are not scanned (gosec's default).
# A rule that is wrong for a line is silenced on that line only, with
# "#nosec Gxxx -- why".
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOSEC=github.com/securego/gosec/v2/cmd/gosec@v2.22.0

echo "lint: staticcheck"
go run "$STATICCHECK" ./...
echo "lint: gosec"
# bench/peer is a module of its own (etcd's client, for the bench's baseline),
# which ./... does not name but gosec's walk enters and cannot type-check.
# gosec asks `go list -m -json` for the module's Go version every time a
# rule looks at it: some three hundred go processes per package, 96% of
# its 430 s of CPU here. GOSECGOVERSION is its own way to be told once; the
# value is the go directive it would have read, so the rules are the same.
GOSECGOVERSION=$(go list -m -f '{{.GoVersion}}')
export GOSECGOVERSION
go run "$GOSEC" -quiet -exclude-generated -exclude-dir=bench/peer ./...
