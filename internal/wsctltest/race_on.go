//go:build race

package wsctltest

// raceEnabled: this process runs with the race detector, so Binary builds
// wsctl with it too (and reuses the packages the test run compiled).
const raceEnabled = true
