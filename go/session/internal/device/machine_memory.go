package device

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// MachineMemoryLimit is the memory this process may use: the smaller of the machine's physical
// memory and its cgroup's (a container's) limit, 0 where neither is known.
func MachineMemoryLimit() uint64 {
	limit := PhysicalMemory()
	if c := CgroupMemoryLimit(); c > 0 && (limit == 0 || c < limit) {
		limit = c
	}
	return limit
}

// PhysicalMemory is MemTotal of /proc/meminfo in bytes, 0 where there is none.
func PhysicalMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// CgroupMemoryLimit is the memory limit of this process's cgroup (v2 memory.max, else v1
// memory.limit_in_bytes), 0 where there is none.
func CgroupMemoryLimit() uint64 {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil || v == 0 || v >= 1<<62 { // "max", or v1's "no limit" (a page-rounded 2^63)
			continue
		}
		return v
	}
	return 0
}
