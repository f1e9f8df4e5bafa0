//go:build !race

package wsctltest

// raceEnabled: this process runs without the race detector.
const raceEnabled = false

// raceFlags are none without the race detector.
var raceFlags []string
