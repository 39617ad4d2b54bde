package session

import (
	"os"
	"strconv"
	"testing"
)

func BenchmarkH5Only(b *testing.B) {
	idx, _ := strconv.Atoi(os.Getenv("H5ONLY"))
	for _, c := range convGemmBenches() {
		if len(c.node.Inputs) > 9 {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			ms := benchSession(b)
			cmds, _, _ := placePlan(b, ms, c.node, c.shapes, Region{})
			recordRepeated(b, ms, cmds[idx:idx+1])
			replayTimes(b, ms, c.macs)
		})
	}
}
