// Package procstop tells when a process sent SIGSTOP has stopped: kill(2)
// only queues the stop, and a test that freezes a child must not go on
// while the child can still run (read its next command, begin a write).
// It is for tests only.
package procstop
