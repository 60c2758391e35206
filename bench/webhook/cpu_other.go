//go:build !linux

package main

import "time"

// processCPU is not measured outside Linux; the report then leaves it out.
func processCPU() time.Duration { return 0 }
