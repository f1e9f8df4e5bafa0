//go:build race

package server_test

// raceBuild: the race detector is on, and it grows goroutine stacks, so
// memory bounds stated for the server as built are not asserted.
const raceBuild = true
