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

func TestH5Variants(t *testing.T) {
	for _, c := range convGemmBenches() {
		in := make([]Tensor, len(c.shapes))
		for i, s := range c.shapes {
			in[i] = MustTensor(s, make([]float32, numel(s)))
		}
		p, _, err := kernelPlanners[plannerKey(c.node)](c.node, 18, infosOf(in))
		if err != nil || p == nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", c.name, p.variant())
	}
}
