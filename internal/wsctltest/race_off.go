//go:build !race

package wsctltest

// raceEnabled: this process runs without the race detector.
const raceEnabled = false
