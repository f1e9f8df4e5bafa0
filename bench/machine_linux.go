//go:build linux

package bench

import (
	"bufio"
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
	sc := bufio.NewScanner(bytes.NewReader(line))
	sc.Split(bufio.ScanWords)
	if !sc.Scan() || sc.Text() != "cpu" {
		return 0, 0, false
	}
	var sum, idle int64
	for i := 0; sc.Scan(); i++ {
		n, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i >= 8 {
			// guest and guest_nice are already counted in user and nice.
			break
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	tick := time.Second / userHZ
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick, sum > 0
}
