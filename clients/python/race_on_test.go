//go:build race

package pythonclient_test

// raceEnabled: the test runs with the race detector, and builds wsctl with it.
const raceEnabled = true
