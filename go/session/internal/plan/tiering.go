package plan

import (
	"slices"
	"sync"
	"time"
)

// Tiering decides, for an InferenceSession, when a new input signature's first run builds its
// plan. A signature's plan pays for itself from its second run: it
// costs the planners, an arena and the recording of its segments once, and then every run is
// cheaper than the interpreter's. A workload whose every run brings a new signature (a decode
// loop over a growing KV cache through Run, each step one token longer) never runs a plan
// twice. Tiering watches whether the plans the session builds are used again: while the
// last few were not, a new signature's first run is interpreted (not even traced) and its
// plan is built when the signature comes a second time; as soon as a signature does come
// back, plans are built on first sight again (a width sweep, a batch-size sweep, any
// recurring set of shapes).
//
// Whether a plan that runs once pays depends on the model: on a small one the planners cost
// more than interpreting the run (a tiny GPT's step: 6 ms planned against 2.5 ms
// interpreted), on a large one a planned run, planners included, is faster than an
// interpreted one (GPT-2-small's step: 44.5 ms against 51). So Tiering times both: the
// first-sight runs that built and ran a plan, and the interpreted runs while plans wait for a
// second sight; when building a plan and running it once costs less than interpreting, new
// signatures are planned once (TierOnce): built from shapes, run, and dropped (their arenas
// freed), since no run will use them again, until a signature comes back (then plans are
// cached again) or planning once turns out dearer than interpreting (then the interpreter
// takes over again, and is timed anew).
type Tiering struct {
	mu sync.Mutex
	// recent are the templates built last, oldest first (at most TieringWindow).
	recent []*Template
	mode   TierMode
	// seen are the signatures met while mode is TierSecondSight or TierOnce (in order), to
	// notice one that comes back.
	seen  map[string]struct{}
	order []string
	// planned and interpreted are the costs of the last first-sight runs that built and ran a
	// plan, and of the last interpreted first-sight runs.
	planned, interpreted costAverage
}

// TierMode is what Tiering does with a new signature's first run.
type TierMode int

const (
	TierCache       TierMode = iota // build its plan, run it, keep it for the signature's next runs
	TierSecondSight                 // interpret it; build the plan if the signature comes again
	TierOnce                        // build its plan from shapes, run it, drop it
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
func (pt *Tiering) onceCheaper() bool {
	return pt.planned.n > 0 && pt.interpreted.n >= 2 && float64(pt.planned.median()) < 0.95*float64(pt.interpreted.median())
}

const (
	// TieringWindow plans built in a row that no second run used turn plans on first sight off.
	TieringWindow = 4
	// maxSeenSignatures bounds the signatures remembered while plans wait for a second sight.
	maxSeenSignatures = 256
)

// Decide says what key's first run does (key has no plan in the session's cache).
func (pt *Tiering) Decide(key string) TierMode {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.mode == TierCache {
		return TierCache
	}
	if _, ok := pt.seen[key]; ok {
		// A signature came back: shapes recur, so plans pay again from the first sight.
		pt.mode, pt.seen, pt.order, pt.recent = TierCache, nil, nil, nil
		return TierCache
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

// RanPlanned notes a first-sight run that built a plan and ran it, and its cost d; in
// TierOnce, a cost above the interpreter's sends new signatures back to it.
func (pt *Tiering) RanPlanned(d time.Duration) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.planned.add(d)
	if pt.mode == TierOnce && pt.planned.median() > pt.interpreted.median() {
		pt.mode, pt.interpreted = TierSecondSight, costAverage{}
	}
}

// RanInterpreted notes an interpreted first-sight run and its cost d; in TierSecondSight,
// once planning once has proved cheaper, new signatures are planned once.
func (pt *Tiering) RanInterpreted(d time.Duration) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.interpreted.add(d)
	if pt.mode == TierSecondSight && pt.onceCheaper() {
		pt.mode = TierOnce
	}
}

// Built notes a plan built for a signature's first run, and turns plans on first sight off
// when the TieringWindow plans built before it each ran only once.
func (pt *Tiering) Built(t *Template) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.mode != TierCache {
		return
	}
	if len(pt.recent) == TieringWindow {
		unused := true
		for _, r := range pt.recent {
			if r.Runs.Load() > 1 {
				unused = false
				break
			}
		}
		if unused {
			pt.mode, pt.recent = TierSecondSight, nil
			if pt.onceCheaper() {
				pt.mode = TierOnce
			}
			return
		}
		pt.recent = pt.recent[1:]
	}
	pt.recent = append(pt.recent, t)
}

// Mode is what new signatures' first runs do now.
func (pt *Tiering) Mode() TierMode {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.mode
}

// InterpretedRuns is how many interpreted first-sight runs have been timed since the
// interpreter was last timed anew.
func (pt *Tiering) InterpretedRuns() int {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.interpreted.n
}
