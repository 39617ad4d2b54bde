package session

import (
	"sync"

	"github.com/loomrt/loom/go/session/internal/plan"
)

// Plans on first or second sight. A signature's plan pays for itself from its second run: it
// costs the planners, an arena and the recording of its segments once, and then every run is
// cheaper than the interpreter's. A workload whose every run brings a new signature (a decode
// loop over a growing KV cache through Run, each step one token longer) never runs a plan
// twice: building one per run made each step slower than interpreting it. planTiering watches
// whether the plans the session builds are used again: while the last few were not, a new
// signature's first run is interpreted (not even traced) and its plan is built when the
// signature comes a second time; as soon as a signature does come back, plans are built on
// first sight again (a width sweep, a batch-size sweep, any recurring set of shapes).
type planTiering struct {
	mu sync.Mutex
	// recent are the templates built last, oldest first (at most tieringWindow).
	recent []*plan.Template
	// secondSight: build plans only for signatures seen before (seen, in order).
	secondSight bool
	seen        map[string]struct{}
	order       []string
}

const (
	// tieringWindow plans built in a row that no second run used turn plans on first sight off.
	tieringWindow = 4
	// maxSeenSignatures bounds the signatures remembered while plans wait for a second sight.
	maxSeenSignatures = 256
)

// planNow says whether key's first run should build its plan now; false: the run is
// interpreted and key remembered, so that its next run builds the plan.
func (pt *planTiering) planNow(key string) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if !pt.secondSight {
		return true
	}
	if _, ok := pt.seen[key]; ok {
		// A signature came back: shapes recur, so plans pay again from the first sight.
		pt.secondSight, pt.seen, pt.order, pt.recent = false, nil, nil, nil
		return true
	}
	if pt.seen == nil {
		pt.seen = map[string]struct{}{}
	}
	if len(pt.order) >= maxSeenSignatures {
		delete(pt.seen, pt.order[0])
		pt.order = pt.order[1:]
	}
	pt.seen[key] = struct{}{}
	pt.order = append(pt.order, key)
	return false
}

// built notes a plan built for a signature's first run, and turns plans on first sight off
// when the tieringWindow plans built before it each ran only once.
func (pt *planTiering) built(t *plan.Template) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if len(pt.recent) == tieringWindow {
		unused := true
		for _, r := range pt.recent {
			if r.Runs.Load() > 1 {
				unused = false
				break
			}
		}
		if unused {
			pt.secondSight, pt.recent = true, nil
			return
		}
		pt.recent = pt.recent[1:]
	}
	pt.recent = append(pt.recent, t)
}
