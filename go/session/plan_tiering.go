package session

import (
	"slices"
	"sync"
	"time"

	"github.com/loomrt/loom/go/session/internal/plan"
)

// Plans on first or second sight. A signature's plan pays for itself from its second run: it
// costs the planners, an arena and the recording of its segments once, and then every run is
// cheaper than the interpreter's. A workload whose every run brings a new signature (a decode
// loop over a growing KV cache through Run, each step one token longer) never runs a plan
// twice. planTiering watches whether the plans the session builds are used again: while the
// last few were not, a new signature's first run is interpreted (not even traced) and its
// plan is built when the signature comes a second time; as soon as a signature does come
// back, plans are built on first sight again (a width sweep, a batch-size sweep, any
// recurring set of shapes).
//
// Whether a plan that runs once pays depends on the model: on a small one the planners cost
// more than interpreting the run (a tiny GPT's step: 6 ms planned against 2.5 ms
// interpreted), on a large one a planned run, planners included, is faster than an
// interpreted one (GPT-2-small's step: 44.5 ms against 51). So planTiering times both: the
// first-sight runs that built and ran a plan, and the interpreted runs while plans wait for a
// second sight; when building a plan and running it once costs less than interpreting, new
// signatures are planned once (tierOnce): built from shapes, run, and dropped (their arenas
// freed), since no run will use them again, until a signature comes back (then plans are
// cached again) or planning once turns out dearer than interpreting (then the interpreter
// takes over again, and is timed anew).
type planTiering struct {
	mu sync.Mutex
	// recent are the templates built last, oldest first (at most tieringWindow).
	recent []*plan.Template
	mode   tierMode
	// seen are the signatures met while mode is tierSecondSight or tierOnce (in order), to
	// notice one that comes back.
	seen  map[string]struct{}
	order []string
	// planned and interpreted are the costs of the last first-sight runs that built and ran a
	// plan, and of the last interpreted first-sight runs.
	planned, interpreted costAverage
}

// tierMode is what planTiering does with a new signature's first run.
type tierMode int

const (
	tierCache       tierMode = iota // build its plan, run it, keep it for the signature's next runs
	tierSecondSight                 // interpret it; build the plan if the signature comes again
	tierOnce                        // build its plan from shapes, run it, drop it
)

// costAverage is the median of the last few durations noted (a session's first run, which
// also pays one-time costs, or a run slowed by a busy machine, moves it little).
type costAverage struct {
	last [4]time.Duration
	n    int
}

func (c *costAverage) add(d time.Duration) {
	c.last[c.n%len(c.last)] = d
	c.n++
}

// median is the median of the durations noted last (0 when none).
func (c *costAverage) median() time.Duration {
	k := min(c.n, len(c.last))
	if k == 0 {
		return 0
	}
	v := append([]time.Duration{}, c.last[:k]...)
	slices.Sort(v)
	if k%2 == 1 {
		return v[k/2]
	}
	return (v[k/2-1] + v[k/2]) / 2
}

// onceCheaper says whether building and running a plan once has cost less than interpreting
// (by 5%, so that noise does not flip the mode back and forth), both measured.
func (pt *planTiering) onceCheaper() bool {
	return pt.planned.n > 0 && pt.interpreted.n >= 2 && float64(pt.planned.median()) < 0.95*float64(pt.interpreted.median())
}

const (
	// tieringWindow plans built in a row that no second run used turn plans on first sight off.
	tieringWindow = 4
	// maxSeenSignatures bounds the signatures remembered while plans wait for a second sight.
	maxSeenSignatures = 256
)

// decide says what key's first run does (key has no plan in the session's cache).
func (pt *planTiering) decide(key string) tierMode {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.mode == tierCache {
		return tierCache
	}
	if _, ok := pt.seen[key]; ok {
		// A signature came back: shapes recur, so plans pay again from the first sight.
		pt.mode, pt.seen, pt.order, pt.recent = tierCache, nil, nil, nil
		return tierCache
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
	return pt.mode
}

// ranPlanned notes a first-sight run that built a plan and ran it, and its cost d; in
// tierOnce, a cost above the interpreter's sends new signatures back to it.
func (pt *planTiering) ranPlanned(d time.Duration) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.planned.add(d)
	if pt.mode == tierOnce && pt.planned.median() > pt.interpreted.median() {
		pt.mode, pt.interpreted = tierSecondSight, costAverage{}
	}
}

// ranInterpreted notes an interpreted first-sight run and its cost d; in tierSecondSight,
// once planning once has proved cheaper, new signatures are planned once.
func (pt *planTiering) ranInterpreted(d time.Duration) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.interpreted.add(d)
	if pt.mode == tierSecondSight && pt.onceCheaper() {
		pt.mode = tierOnce
	}
}

// built notes a plan built for a signature's first run, and turns plans on first sight off
// when the tieringWindow plans built before it each ran only once.
func (pt *planTiering) built(t *plan.Template) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.mode != tierCache {
		return
	}
	if len(pt.recent) == tieringWindow {
		unused := true
		for _, r := range pt.recent {
			if r.Runs.Load() > 1 {
				unused = false
				break
			}
		}
		if unused {
			pt.mode, pt.recent = tierSecondSight, nil
			if pt.onceCheaper() {
				pt.mode = tierOnce
			}
			return
		}
		pt.recent = pt.recent[1:]
	}
	pt.recent = append(pt.recent, t)
}
