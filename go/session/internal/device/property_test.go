package device

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/sessiontest"
)

// propertyCase is a random program: allocations with random initial contents and a random
// command list of mix dispatches (random bindings, random accesses), fills and copies.
type propertyCase struct {
	sizes    []uint64
	shared   []bool
	initial  [][]byte
	weight   []byte // contents of an extra weight allocation, nil for none
	commands []Command
	describe []string
}

// propertyHarness runs random cases on sessions in one context: each case is executed once
// with its commands issued one by one on the session's stream (sequentially) and once as the
// recorded graph on the host backend's concurrent graph executor, from the same initial
// memory, and the final memory of both runs is compared.
type propertyHarness struct {
	t           *testing.T
	maxBindings int // per dispatch
	ctx         *ModelContext
	mixes       mixKernels
	filter      edgeFilter // nil: the inferred edges
	delay       uint32     // microseconds every mix dispatch sleeps between reading and writing
}

// mixKernels supplies random kernels: for any list of binding accesses, a kernel with one
// byte buffer per access that hashes everything it reads and overwrites everything it writes
// with bytes derived from the hash, touching nothing else.
type mixKernels interface {
	// kernel returns the kernel for modes in session s (made once per session and modes).
	kernel(t *testing.T, s *ModelSession, modes []Access) KernelID
	// args are a dispatch's scalar arguments.
	args(seed, delayMicros uint32, bindings []Binding) []uint64
	// done is called after s is closed.
	done(t *testing.T, s *ModelSession)
}

// staticMixes are the C mix kernel of internal/testkernels, imported once per access list.
type staticMixes struct {
	module map[*ModelSession]*native.Kernel
	ids    map[*ModelSession]map[string]KernelID
}

func newStaticMixes() *staticMixes {
	return &staticMixes{module: map[*ModelSession]*native.Kernel{}, ids: map[*ModelSession]map[string]KernelID{}}
}

func (m *staticMixes) kernel(t *testing.T, s *ModelSession, modes []Access) KernelID {
	if m.module[s] == nil {
		m.module[s] = testKernel(t, s.ctx.dev, "mix")
		m.ids[s] = map[string]KernelID{}
	}
	key := fmt.Sprint(modes)
	id, ok := m.ids[s][key]
	if !ok {
		var err error
		id, err = s.ImportKernel(m.module[s], mixSignature(modes))
		require.NoError(t, err)
		m.ids[s][key] = id
	}
	return id
}

func (m *staticMixes) args(seed, delayMicros uint32, bindings []Binding) []uint64 {
	return mixArgs(seed, delayMicros, bindings)
}

func (m *staticMixes) done(t *testing.T, s *ModelSession) {
	delete(m.module, s)
	delete(m.ids, s)
}

// loomMixes are Loom kernels generated for each access list and compiled by the session.
type loomMixes struct {
	ids map[*ModelSession]map[string]KernelID
}

func (m *loomMixes) kernel(t *testing.T, s *ModelSession, modes []Access) KernelID {
	if m.ids[s] == nil {
		m.ids[s] = map[string]KernelID{}
	}
	key := fmt.Sprint(modes)
	id, ok := m.ids[s][key]
	if !ok {
		ids, err := s.Compile([]KernelSource{loomMixSource(modes)})
		require.NoError(t, err)
		id = ids[0]
		m.ids[s][key] = id
	}
	return id
}

// args are the seed, then each binding's length; the Loom kernels take no delay.
func (m *loomMixes) args(seed, _ uint32, bindings []Binding) []uint64 {
	args := []uint64{uint64(seed)}
	for _, b := range bindings {
		args = append(args, b.Region.Bytes())
	}
	return args
}

func (m *loomMixes) done(t *testing.T, s *ModelSession) { delete(m.ids, s) }

// loomMixSource writes the Loom mix kernel for modes.
func loomMixSource(modes []Access) KernelSource {
	var params, scalars, fold, write strings.Builder
	for i, m := range modes {
		fmt.Fprintf(&params, "b%d buffer[u8] %s, ", i, m)
		fmt.Fprintf(&scalars, ", n%d index", i)
		if reads(m) {
			fmt.Fprintf(&fold, "\t\tfor j := range(n%d) {\n\t\t\th = (h ^ u32(b%d[j])) * 16777619\n\t\t}\n", i, i)
		}
		if AccessWrites(m) {
			fmt.Fprintf(&write, "\t\tfor j := range(n%d) {\n\t\t\tx := h + u32(j) * 2654435761 + %d\n\t\t\tx = (x ^ (x >> 15)) * 2246822519\n\t\t\tb%d[j] = u8(x ^ (x >> 13))\n\t\t}\n", i, 40503*(i+1), i)
		}
	}
	src := fmt.Sprintf(`
kernel mix {
	launch() {
		grid = (1, 1, 1)
		block = (1, 1, 1)
	}
	device(%sseed u32%s) {
		h := seed
%s%s	}
}
`, params.String(), scalars.String(), fold.String(), write.String())
	return KernelSource{Name: fmt.Sprintf("mix%v.loom", modes), Source: []byte(src)}
}

func (h *propertyHarness) generate(r *rand.Rand) propertyCase {
	var c propertyCase
	n := 1 + r.IntN(3)
	for range n {
		size := 1 + r.Uint64N(96)
		c.sizes = append(c.sizes, size)
		c.shared = append(c.shared, r.IntN(2) == 0)
		c.initial = append(c.initial, randomBytes(r, int(size)))
	}
	if r.IntN(3) == 0 {
		c.weight = randomBytes(r, 1+r.IntN(32))
	}
	return c
}

// randomRegion picks a non-empty region of one of regions.
func randomRegion(r *rand.Rand, regions []Region) Region {
	parent := regions[r.IntN(len(regions))]
	off := r.Uint64N(parent.Bytes())
	n := 1 + r.Uint64N(parent.Bytes()-off)
	sub, err := parent.Slice(off, n)
	if err != nil {
		panic(err)
	}
	return sub
}

// run executes one case and returns "" when both executions agree, else a description.
func (h *propertyHarness) run(r *rand.Rand, c propertyCase) string {
	t := h.t
	s, err := InContext(h.ctx)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, s.Close())
		h.mixes.done(t, s)
	}()
	s.edgeFilter = h.filter
	var regions []Region
	for i, size := range c.sizes {
		var reg Region
		if c.shared[i] {
			reg, err = s.AllocateShared(size)
		} else {
			reg, err = s.Allocate(size)
		}
		require.NoError(t, err)
		regions = append(regions, reg)
	}
	readable := slices.Clone(regions)
	if c.weight != nil {
		w, err := s.Weight(c.weight)
		require.NoError(t, err)
		readable = append(readable, w)
	}
	commands := 1 + r.IntN(24)
	for range commands {
		switch p := r.IntN(10); {
		case p < 7:
			bindings := make([]Binding, 1+r.IntN(h.maxBindings))
			modes := make([]Access, len(bindings))
			for i := range bindings {
				modes[i] = Access(1 + r.IntN(3))
				pool := regions
				if modes[i] == AccessRead {
					pool = readable
				}
				bindings[i] = Binding{Region: randomRegion(r, pool), Access: modes[i]}
			}
			id := h.mixes.kernel(t, s, modes)
			c.commands = append(c.commands, Dispatch{Kernel: id, Args: h.mixes.args(r.Uint32(), h.delay, bindings), Bindings: bindings})
			c.describe = append(c.describe, fmt.Sprintf("mix %v", bindings))
		case p < 8:
			reg := randomRegion(r, regions)
			c.commands = append(c.commands, Fill{Region: reg, Byte: byte(r.Uint32())})
			c.describe = append(c.describe, fmt.Sprintf("fill %v", reg))
		default:
			src := randomRegion(r, readable)
			dstParent := regions[r.IntN(len(regions))]
			if src.Bytes() > dstParent.Bytes() {
				src, _ = src.Slice(0, dstParent.Bytes())
			}
			off := r.Uint64N(dstParent.Bytes() - src.Bytes() + 1)
			dst, err := dstParent.Slice(off, src.Bytes())
			require.NoError(t, err)
			if src.overlaps(dst) {
				reg := randomRegion(r, regions)
				c.commands = append(c.commands, Fill{Region: reg, Byte: byte(r.Uint32())})
				c.describe = append(c.describe, fmt.Sprintf("fill %v", reg))
				continue
			}
			c.commands = append(c.commands, Copy{Src: src, Dst: dst})
			c.describe = append(c.describe, fmt.Sprintf("copy %v -> %v", src, dst))
		}
	}
	require.NoError(t, s.Record("case", c.commands))

	execute := func(graph bool) [][]byte {
		for i, reg := range regions {
			require.NoError(t, s.Upload(reg, c.initial[i]))
		}
		if graph {
			require.NoError(t, s.Replay("case"))
		} else {
			s.mu.Lock()
			err := s.issueDirect("test", s.recordings["case"])
			s.mu.Unlock()
			require.NoError(t, err)
		}
		out := make([]ReadRequest, len(regions))
		for i, reg := range regions {
			out[i] = ReadRequest{Region: reg, Dst: make([]byte, reg.Bytes())}
		}
		require.NoError(t, s.ReadMany(out))
		final := make([][]byte, len(out))
		for i := range out {
			final[i] = out[i].Dst
		}
		return final
	}
	sequential := execute(false)
	graph := execute(true)
	for i := range sequential {
		if !bytes.Equal(sequential[i], graph[i]) {
			return fmt.Sprintf("allocation %d differs after the graph run\ncommands:\n  %s", i, strings.Join(c.describe, "\n  "))
		}
	}
	return ""
}

func TestRecordedGraphMatchesSequentialExecution(t *testing.T) {
	cases := 3000
	if testing.Short() {
		cases = 200
	}
	r := sessiontest.NewRand(t)
	h := &propertyHarness{t: t, ctx: newContext(t, sessiontest.OpenHost(t, 4), Unlimited), mixes: newStaticMixes(), maxBindings: 4}
	for i := range cases {
		c := h.generate(r)
		if diff := h.run(r, c); diff != "" {
			t.Fatalf("case %d: %s", i, diff)
		}
	}
}

// TestDroppedEdgeIsCaught shows the property test has teeth: with one inferred edge dropped
// from each graph (and each dispatch sleeping between its reads and its writes, so that a
// dispatch running too early overlaps its predecessor), the graph and sequential executions
// disagree.
func TestDroppedEdgeIsCaught(t *testing.T) {
	r := sessiontest.NewRand(t)
	h := &propertyHarness{t: t, ctx: newContext(t, sessiontest.OpenHost(t, 4), Unlimited), mixes: newStaticMixes(), maxBindings: 4, delay: 300}
	dropped := 0
	h.filter = func(node int, deps []int) []int {
		// Drop every edge of the first node that has one: it becomes a root and starts with
		// the graph, before the commands it had to follow have finished.
		if dropped == 0 && len(deps) > 0 {
			dropped++
			return nil
		}
		return deps
	}
	detected := 0
	const cases = 60
	for range cases {
		dropped = 0
		c := h.generate(r)
		if h.run(r, c) != "" {
			detected++
		}
	}
	t.Logf("%d of %d cases with a dropped edge disagreed with sequential execution", detected, cases)
	require.Positive(t, detected, "dropping edges went unnoticed: the property test cannot catch a missing edge")
}

// TestRecordedGraphMatchesSequentialExecutionLoom is the property test with Loom-compiled
// random kernels: one generated kernel per access list of up to two bindings (12 kernels, each
// compiled once by the context's shared compiler, then served from its cache).
func TestRecordedGraphMatchesSequentialExecutionLoom(t *testing.T) {
	cases := 600
	if testing.Short() {
		cases = 60
	}
	r := sessiontest.NewRand(t)
	h := &propertyHarness{t: t, ctx: newContext(t, sessiontest.OpenHost(t, 4), Unlimited), mixes: &loomMixes{ids: map[*ModelSession]map[string]KernelID{}}, maxBindings: 2}
	for i := range cases {
		c := h.generate(r)
		if diff := h.run(r, c); diff != "" {
			t.Fatalf("case %d: %s", i, diff)
		}
	}
}
