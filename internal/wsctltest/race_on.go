//go:build race

package wsctltest

// raceEnabled: this process runs with the race detector, so Binary builds
// wsctl with it too (and reuses the packages the test run compiled).
const raceEnabled = true

// raceFlags are the build flags of a race build, the README's: the race
// detector on, and off for SQLite's C translated to Go (modernc.org/...),
// which it would not see under cgo either and which it slows fourfold.
var raceFlags = []string{"-race", raceGcflags}
