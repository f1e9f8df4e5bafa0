//go:build linux

package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// hostInfo reads the processor's model name (and whether it runs under a
// hypervisor), the RAM and the kernel's release from /proc.
func hostInfo() (cpu string, memGiB float64, kernel string) {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		virtual := false
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				if cpu == "" {
					cpu = strings.Join(strings.Fields(v), " ")
				}
			case "flags":
				virtual = virtual || slices.Contains(strings.Fields(v), "hypervisor")
			}
		}
		if cpu != "" && virtual {
			cpu += " (virtual machine)"
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					memGiB = kb / (1 << 20)
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return cpu, memGiB, kernel
}

// storageOf names the file system and device that hold dir, from the
// mount with the longest path that contains it: "ext4 on /dev/vda".
func storageOf(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	best, out := -1, ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mnt := f[1]
		inside := abs == mnt || mnt == "/" || strings.HasPrefix(abs, mnt+"/")
		if inside && len(mnt) > best {
			best, out = len(mnt), f[2]+" on "+f[0]
		}
	}
	return out
}

// loadAverage is the one-minute load average, from /proc/loadavg.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
