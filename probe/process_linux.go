package probe

import (
	"os"
	"strconv"
	"strings"
)

// liveMembers counts the processes of the group that are not zombies,
// from /proc/PID/stat (field 3 is the state, field 5 the process group;
// the command name in field 2 may hold spaces and parentheses, so fields
// are counted after its last ")"). ok is false when /proc cannot be read.
func liveMembers(pgid int) (live int, ok bool) {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range dir {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid && f[0] != "Z" && f[0] != "X" {
			live++
		}
	}
	return live, true
}
