package main

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system: the
// runtime's own CPU estimates are only brought up to date at collections.
func processCPU() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
