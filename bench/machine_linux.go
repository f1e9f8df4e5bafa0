//go:build linux

package bench

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, which Linux fixes at
// 100 for every architecture it reports to user space.
const userHZ = 100

// MachineCPU is the CPU time every process on the machine has used since
// boot (busy: all but idle and iowait, over all CPUs) and the time all
// CPUs have existed (total), from /proc/stat; ok is false where it cannot
// be read. The difference of two readings, per op, is what a row cost the
// whole machine: its clients, its server and its database alike.
func MachineCPU() (busy, total time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, 0, false
	}
	// user nice system idle iowait irq softirq steal; guest and
	// guest_nice, after them, are already counted in user and nice.
	var sum, idle int64
	for i, field := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(string(field), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	tick := time.Second / userHZ
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick, sum > 0
}
