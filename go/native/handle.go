package native

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// core is the lifetime state every owning type (Device, Stream, Event, Buffer, Module, Graph,
// GraphExec) keeps behind its public pointer. It implements three rules:
//
//   - Calls pin the handles they use (an atomic count); Close marks the handle closing, refuses
//     new pins with ErrClosed, waits for the current ones to drain and only then destroys the C
//     handle. Pins never block, so no combination of calls and Closes can deadlock.
//   - A handle that others depend on (a device's streams and buffers, a buffer or module that a
//     graph refers to) cannot be closed while they live: Close returns ErrInUse naming them.
//     Dependents keep their parents' public objects reachable, so a leaked parent is never
//     collected before its dependents are destroyed.
//   - Buffers, modules, events and graph execs remember the streams they were used on; before
//     their C handle is destroyed those streams are synchronized, so no enqueued work can still
//     be using the memory.
//
// The public object carries a runtime.AddCleanup backstop: when it becomes unreachable without
// Close, the leak hook is told and the C handle is destroyed as Close would have.
type core struct {
	kind string
	id   uint64

	// state is pins<<1 | closingBit.
	state atomic.Int64

	mu         sync.Mutex
	drained    sync.Cond // signalled (with mu) when the last pin of a closing handle goes
	closed     bool
	dependents map[*core]struct{}
	parents    []*core
	parentRefs []any // the parents' public objects, kept reachable while this handle lives
	users      map[*streamCore]struct{}
	lastUser   atomic.Pointer[streamCore]

	destroy  func()
	cleanup  runtime.Cleanup
	finished []func() // run after destroy (e.g. releasing a Runtime's allocation charge)
}

const closingBit = 1

var nextHandleID atomic.Uint64

func newCore(kind string, destroy func()) *core {
	c := &core{kind: kind, id: nextHandleID.Add(1), destroy: destroy}
	c.drained.L = &c.mu
	return c
}

// guard registers the leak backstop for the public object that owns c.
func guard[T any](public *T, c *core) {
	c.cleanup = runtime.AddCleanup(public, leaked, c)
}

// String names the handle for messages ("buffer #7").
func (c *core) String() string { return fmt.Sprintf("%s #%d", c.kind, c.id) }

// pin marks c in use by a call; it fails once c is closing.
func (c *core) pin(op string) error {
	if c.state.Add(2)&closingBit != 0 {
		c.unpin()
		return newError(op, StatusClosed, "%s is closed", c)
	}
	return nil
}

func (c *core) unpin() {
	if c.state.Add(-2) == closingBit {
		c.mu.Lock()
		c.drained.Broadcast()
		c.mu.Unlock()
	}
}

// isClosed reports whether Close has begun.
func (c *core) isClosed() bool { return c.state.Load()&closingBit != 0 }

// close implements Close for every type: idempotent, refuses while dependents live, waits for
// running calls, then destroys.
func (c *core) close(op string) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	if len(c.dependents) > 0 {
		err := newError(op, StatusInUse, "%s still has %s; close them first", c, describeCores(c.dependents))
		c.mu.Unlock()
		return err
	}
	c.closed = true
	c.state.Or(closingBit)
	for c.state.Load() != closingBit {
		c.drained.Wait()
	}
	c.mu.Unlock()
	c.cleanup.Stop()
	c.finish()
	return nil
}

// finish waits for streams that used c, destroys the C handle and releases the parents.
func (c *core) finish() {
	c.mu.Lock()
	users := make([]*streamCore, 0, len(c.users))
	for s := range c.users {
		users = append(users, s)
	}
	parents := c.parents
	c.users, c.parents, c.parentRefs = nil, nil, nil
	c.mu.Unlock()
	c.lastUser.Store(nil)
	for _, s := range users {
		s.drainForRelease()
	}
	c.destroy()
	for _, p := range parents {
		p.mu.Lock()
		delete(p.dependents, c)
		p.mu.Unlock()
	}
	for _, f := range c.finished {
		f()
	}
}

// attach records c as a dependent of parent (whose public object is ref), unless parent is
// closing. Attaching twice is a no-op.
func (c *core) attach(op string, parent *core, ref any) error {
	parent.mu.Lock()
	if parent.closed {
		parent.mu.Unlock()
		return newError(op, StatusClosed, "%s is closed", parent)
	}
	if _, ok := parent.dependents[c]; ok {
		parent.mu.Unlock()
		return nil
	}
	if parent.dependents == nil {
		parent.dependents = make(map[*core]struct{})
	}
	parent.dependents[c] = struct{}{}
	parent.mu.Unlock()
	c.mu.Lock()
	c.parents = append(c.parents, parent)
	c.parentRefs = append(c.parentRefs, ref)
	c.mu.Unlock()
	return nil
}

// detach undoes attach (used when a capture hands its references over to the captured graph).
func (c *core) detach(parent *core) {
	parent.mu.Lock()
	delete(parent.dependents, c)
	parent.mu.Unlock()
	c.mu.Lock()
	for i, p := range c.parents {
		if p == parent {
			c.parents = slices.Delete(c.parents, i, i+1)
			c.parentRefs = slices.Delete(c.parentRefs, i, i+1)
			break
		}
	}
	c.mu.Unlock()
}

// usedOn records that work using c was enqueued on s. The caller holds a pin on c.
func (c *core) usedOn(s *streamCore) {
	if c.lastUser.Load() == s {
		return
	}
	c.mu.Lock()
	if c.users == nil {
		c.users = make(map[*streamCore]struct{})
	}
	c.users[s] = struct{}{}
	c.mu.Unlock()
	c.lastUser.Store(s)
}

func describeCores(set map[*core]struct{}) string {
	list := make([]*core, 0, len(set))
	for c := range set {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b *core) int { return cmp.Compare(a.id, b.id) })
	names := make([]string, 0, 8)
	for i, c := range list {
		if i == 8 {
			names = append(names, fmt.Sprintf("and %d more", len(list)-8))
			break
		}
		names = append(names, c.String())
	}
	noun := "live dependents"
	if len(list) == 1 {
		noun = "a live dependent"
	} else {
		noun = fmt.Sprintf("%d %s", len(list), noun)
	}
	return noun + " (" + strings.Join(names, ", ") + ")"
}

var leakHook atomic.Pointer[func(kind string)]

// SetLeakHook installs fn to be called, with the handle's kind ("device", "stream", "event",
// "buffer", "module", "graph", "graph exec"), whenever the garbage collector finds a handle that
// was never closed; nil removes the hook. It returns the previous hook. The backstop then
// releases the handle as Close would. The hook runs on a runtime goroutine and must not block.
//
// Leaks are bugs: tests install a hook that fails them, and a process may log the kinds.
func SetLeakHook(fn func(kind string)) (previous func(kind string)) {
	var p *func(string)
	if fn != nil {
		p = &fn
	}
	if old := leakHook.Swap(p); old != nil {
		return *old
	}
	return nil
}

// leaked is the cleanup of every public handle object.
func leaked(c *core) {
	if fn := leakHook.Load(); fn != nil {
		(*fn)(c.kind)
	}
	c.mu.Lock()
	if c.closed || len(c.dependents) > 0 {
		// Dependents keep the public object reachable, so they cannot exist here; if they did,
		// leaking the C handle is better than freeing memory still in use.
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.state.Or(closingBit)
	c.mu.Unlock()
	// A call can still be running: the public object may be dead (unreachable) while one of
	// its methods is inside the shim, holding only the core. Wait for such pins, and for the
	// streams that used the handle, off the cleanup goroutine: cleanups must not block.
	go func() {
		c.mu.Lock()
		for c.state.Load() != closingBit {
			c.drained.Wait()
		}
		c.mu.Unlock()
		c.finish()
	}()
}
