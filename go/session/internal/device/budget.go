package device

import (
	"fmt"
	"sync/atomic"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Budget bounds the bytes that several owners allocate together: the memory of a
// ModelContext made with NewContextSharing and whatever else its users charge to it (an
// InferenceSession's runs charge their host tensors). Charge reserves before an allocation
// is made and fails, reserving nothing, when the total would exceed the limit; Credit gives
// bytes back. A Budget is safe for concurrent use.
type Budget struct {
	limit   uint64
	charged atomic.Uint64
	// name is how errors call the budget ("the session's memory budget (WithMemoryBudget)").
	name string
}

// NewBudget is a budget of limit bytes (Unlimited for none) that errors call name.
func NewBudget(limit uint64, name string) *Budget {
	if limit == 0 {
		limit = Unlimited
	}
	return &Budget{limit: limit, name: name}
}

// Limit is the most bytes the budget lets its owners hold at once.
func (b *Budget) Limit() uint64 { return b.limit }

// Charged is the bytes its owners hold now.
func (b *Budget) Charged() uint64 { return b.charged.Load() }

// Charge reserves bytes for what (the tensor or buffer about to be allocated, named in the
// error), or fails with an *Error of kind ErrOverBudget that names the size asked for, the
// limit and what is held already, reserving nothing.
func (b *Budget) Charge(op, what string, bytes uint64) error {
	for {
		cur := b.charged.Load()
		if bytes > b.limit || cur > b.limit-bytes {
			return tensor.NewError(op, tensor.ErrOverBudget, "%s would take %s, over %s of %s (%s already held)",
				what, FormatBytes(bytes), b.name, FormatBytes(b.limit), FormatBytes(cur))
		}
		if b.charged.CompareAndSwap(cur, cur+bytes) {
			return nil
		}
	}
}

// Credit gives back bytes that Charge reserved.
func (b *Budget) Credit(bytes uint64) {
	if bytes != 0 {
		b.charged.Add(-bytes)
	}
}

// FormatBytes writes n as "123 bytes" or with a binary unit and the exact count
// ("1.5 GiB (1610612736 bytes)").
func FormatBytes(n uint64) string {
	if n == Unlimited {
		return "no limit"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", v, "KMGTPE"[i], n)
}

// NewContextSharing makes a context on dev (which stays the caller's) whose allocations are
// charged to b, which other owners may share.
func NewContextSharing(dev *native.Device, b *Budget) (*ModelContext, error) {
	if b == nil {
		return nil, tensor.NewError("NewContext", tensor.ErrInvalidArgument, "nil budget")
	}
	c, err := NewContext(dev, b.limit)
	if err != nil {
		return nil, err
	}
	c.shared = b
	return c, nil
}
