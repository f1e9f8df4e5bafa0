//go:build !race

package server_test

// raceBuild: the race detector is off.
const raceBuild = false
