package device

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Unlimited is a context budget without a limit.
const Unlimited uint64 = math.MaxUint64

// ModelContext is what model sessions and definitions on one device share: the device (the
// device runtime every stream, buffer and module is created on), a Loom compiler for the
// device's target, created on first use, and an allocation budget. Every allocation made in
// the context is charged to the budget before it is made and credited back when it is freed;
// one that would exceed the budget fails with ErrOverBudget and allocates nothing.
//
// A ModelContext is safe for concurrent use. Close it after the sessions and definitions made
// in it.
type ModelContext struct {
	dev        *native.Device
	ownsDevice bool
	budget     uint64
	charged    atomic.Uint64
	// shared, when set, is the budget the context's allocations are charged to instead of
	// budget and charged (NewContextSharing).
	shared *Budget

	compilerMu   sync.Mutex
	compiler     Compiler // zero until first use or setCompiler
	ownsCompiler bool

	mu     sync.Mutex
	users  int
	closed bool
}

// NewContext makes a context on dev (which stays the caller's, to close after the context)
// with an allocation budget in bytes (Unlimited for none).
func NewContext(dev *native.Device, budget uint64) (*ModelContext, error) {
	const op = "NewContext"
	if dev == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "nil device")
	}
	if budget == 0 {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "a budget of 0 bytes allows no allocation; use Unlimited for no limit")
	}
	return &ModelContext{dev: dev, budget: budget}, nil
}

// Device is the context's device.
func (c *ModelContext) Device() *native.Device { return c.dev }

// Target is the code target of the context's device ("host-x86_64-v3", "sm_90", ...).
func (c *ModelContext) Target() string { return c.dev.Target() }

// Budget is the most bytes the context's allocations may hold at once.
func (c *ModelContext) Budget() uint64 {
	if c.shared != nil {
		return c.shared.Limit()
	}
	return c.budget
}

// Charged is the bytes currently allocated in the context (with a shared budget, what all
// of its owners hold).
func (c *ModelContext) Charged() uint64 {
	if c.shared != nil {
		return c.shared.Charged()
	}
	return c.charged.Load()
}

// Compiler returns the context's Loom compiler for its device's target, creating it on the
// first call (Loom's default configuration: the on-disk cache under $LOOM_CACHE_DIR or the
// user cache directory, $CC or gcc for host code). Sessions made in the context share it.
func (c *ModelContext) Compiler() (Compiler, error) {
	const op = "ModelContext.Compiler"
	c.compilerMu.Lock()
	defer c.compilerMu.Unlock()
	if err := c.usable(op); err != nil {
		return Compiler{}, err
	}
	if c.compiler.Loom != nil {
		return c.compiler, nil
	}
	comp, err := defaultCompiler(op, c.dev)
	if err != nil {
		return Compiler{}, err
	}
	c.compiler, c.ownsCompiler = comp, true
	return comp, nil
}

// setCompiler installs a caller-owned compiler (WithCompiler); it must target the device.
func (c *ModelContext) setCompiler(op string, comp Compiler) error {
	if err := CheckTarget(comp, op, c.dev); err != nil {
		return err
	}
	c.compilerMu.Lock()
	defer c.compilerMu.Unlock()
	if c.compiler.Loom != nil {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "the context already has a compiler")
	}
	c.compiler, c.ownsCompiler = comp, false
	return nil
}

// charge reserves bytes of the budget, or fails without reserving anything.
func (c *ModelContext) charge(op string, bytes uint64) error {
	if c.shared != nil {
		return c.shared.Charge(op, "a buffer", bytes)
	}
	for {
		cur := c.charged.Load()
		if bytes > c.budget || cur > c.budget-bytes {
			return tensor.NewError(op, tensor.ErrOverBudget, "allocating %d bytes would exceed the context's budget of %d bytes (%d bytes already allocated)", bytes, c.budget, cur)
		}
		if c.charged.CompareAndSwap(cur, cur+bytes) {
			return nil
		}
	}
}

// credit returns bytes to the budget.
func (c *ModelContext) credit(bytes uint64) {
	if c.shared != nil {
		c.shared.Credit(bytes)
		return
	}
	c.charged.Add(-bytes)
}

// freeAllocation frees a's buffer unless a is borrowed (its owner frees it), and forgets it.
func (c *ModelContext) freeAllocation(a *allocation) error {
	buf := a.buf
	a.buf = nil
	if buf == nil || a.borrowed {
		return nil
	}
	if a.wrapped {
		return buf.Close()
	}
	return c.free(buf)
}

// alloc charges bytes, then allocates them on the device.
func (c *ModelContext) alloc(op string, kind native.MemoryKind, bytes uint64) (*native.Buffer, error) {
	if err := c.charge(op, bytes); err != nil {
		return nil, err
	}
	buf, err := c.dev.Alloc(kind, bytes)
	if err != nil {
		c.credit(bytes)
		return nil, tensor.WrapError(op, tensor.ErrDevice, err, "cannot allocate %d bytes of %s memory", bytes, kind)
	}
	return buf, nil
}

// free closes a buffer allocated by alloc and credits its bytes.
func (c *ModelContext) free(buf *native.Buffer) error {
	if buf == nil {
		return nil
	}
	if err := buf.Close(); err != nil {
		return err
	}
	c.credit(buf.Size())
	return nil
}

func (c *ModelContext) usable(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return tensor.NewError(op, tensor.ErrClosed, "the context is closed")
	}
	return nil
}

// acquire registers a session or definition using the context.
func (c *ModelContext) acquire(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return tensor.NewError(op, tensor.ErrClosed, "the context is closed")
	}
	c.users++
	return nil
}

func (c *ModelContext) release() {
	c.mu.Lock()
	c.users--
	c.mu.Unlock()
}

// Close releases the context's compiler (unless the caller supplied it) and, for contexts
// that Open made, the device. It refuses with ErrInUse while sessions or definitions made in
// the context are open. Idempotent.
func (c *ModelContext) Close() error {
	const op = "ModelContext.Close"
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	if c.users > 0 {
		n := c.users
		c.mu.Unlock()
		return tensor.NewError(op, tensor.ErrInUse, "%d sessions or definitions still use the context; close them first", n)
	}
	c.closed = true
	c.mu.Unlock()
	var errs []error
	c.compilerMu.Lock()
	if c.ownsCompiler && c.compiler.Loom != nil {
		errs = append(errs, c.compiler.Loom.Close())
	}
	c.compiler = Compiler{}
	c.compilerMu.Unlock()
	if c.ownsDevice {
		errs = append(errs, c.dev.Close())
	}
	return tensor.JoinErrors(op, errs)
}

// loomCompiler is the context's Loom compiler when one was made (nil before the first
// Compiler call): it is only looked at, never created.
func LoomCompiler(c *ModelContext) *loom.Compiler {
	c.compilerMu.Lock()
	defer c.compilerMu.Unlock()
	return c.compiler.Loom
}
