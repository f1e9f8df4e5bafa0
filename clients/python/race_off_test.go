//go:build !race

package pythonclient_test

// raceEnabled: the test runs without the race detector.
const raceEnabled = false
