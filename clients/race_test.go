//go:build race

package clients_test

const raceEnabled = true
