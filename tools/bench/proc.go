package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/phalanx-sched/phalanx/tools/bench/report"
)

// resetPeakRSS restarts this process's VmHWM accounting (Linux ≥ 4.0,
// "5" > /proc/self/clear_refs), so that each arm's peak is its own and not
// an earlier arm's. It reports whether the reset worked.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS returns VmHWM of a process ("self" or a pid) in bytes, or 0.
func peakRSS(pid string) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%s/status", pid))
	if err != nil {
		return 0
	}
	return report.ProcField(string(data), "VmHWM") * 1024
}

// processCPU is this process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPUOf is a process's user+system CPU time so far, from
// /proc/<pid>/stat (in USER_HZ ticks, 100 a second on Linux), or 0.
func processCPUOf(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after it. utime and stime are fields 14 and 15 of the line.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const userHZ = 100
	return time.Duration(utime+stime) * time.Second / userHZ
}

// loadAverage is the 1-minute load average, or 0.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}
