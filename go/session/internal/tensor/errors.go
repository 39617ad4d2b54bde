package tensor

import (
	"context"
	"errors"
	"fmt"

	"github.com/loomrt/loom/go/graph"
)

// Sentinels for errors.Is; every error this package returns is an *Error matching one of them,
// except a run its context stopped, whose *Error matches context.Canceled or
// context.DeadlineExceeded instead.
var (
	// ErrInvalidArgument: a bad size, region, kernel id, command or option.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrClosed: the session, context, definition or slot was closed (or frozen).
	ErrClosed = errors.New("closed")
	// ErrFailed: a stream operation of the session failed earlier; the session is latched
	// failed and refuses every call (Close still releases it).
	ErrFailed = errors.New("session failed")
	// ErrOverBudget: an allocation would exceed its context's budget or the session's memory
	// budget (WithMemoryBudget), a tensor a run would make has more elements than the
	// session's limit (graph.Limits.MaxElements), or a Loop or Scan would run more iterations
	// than the session's limit (WithMaxLoopIterations).
	ErrOverBudget = errors.New("over budget")
	// ErrImmutable: a write, fill, copy or upload targets a weight.
	ErrImmutable = errors.New("immutable region")
	// ErrNotRecorded: no recording has that key.
	ErrNotRecorded = errors.New("not recorded")
	// ErrTargetMismatch: code or a compiler for another target than the device's.
	ErrTargetMismatch = errors.New("target mismatch")
	// ErrDevice: the device or go/native refused or failed an operation that is not otherwise
	// classified (out of device memory, a failed Close); the cause says which.
	ErrDevice = errors.New("device error")
	// ErrCompile: a Loom kernel did not compile; the cause is the compiler's message.
	ErrCompile = errors.New("compile error")
	// ErrInUse: Close refused because sessions, definitions or slots still depend on it.
	ErrInUse = errors.New("in use")
	// ErrInternal: an operator panicked (a bug in Loom that the model or the inputs reached).
	// The run fails with an *Error naming the node whose Cause is a *PanicError; the session
	// stays usable.
	ErrInternal = errors.New("internal error")
)

// Error is a failed call: which method (Op), what kind of failure (Kind, one of the sentinels
// above, or context.Canceled or context.DeadlineExceeded for a run its context stopped), the
// node at fault when the failure belongs to one (Node and OpType), a message naming what is at
// fault, and the underlying error if any (for example the *native.Error of a failed stream
// operation, or the cause of a context cancelled with context.WithCancelCause).
//
// errors.Is matches both the Kind and the Cause, and errors.As finds the Error:
//
//	var e *session.Error
//	if errors.As(err, &e) && e.Node != "" {
//		log.Printf("node %s (%s) failed: %v", e.Node, e.OpType, err)
//	}
type Error struct {
	Op   string
	Kind error
	// Node and OpType name the graph node the failure belongs to (of a subgraph for a node
	// inside an If, Loop or Scan body); empty when it belongs to none. For a cancelled run,
	// the node the run stopped before.
	Node, OpType string
	Message      string
	Cause        error
}

// Error formats as "session: Op: kind: node "name" (OpType): message: cause".
func (e *Error) Error() string {
	msg := "session: " + e.Op + ": " + e.Kind.Error()
	if e.Node != "" || e.OpType != "" {
		msg += ": node " + fmt.Sprintf("%q", e.Node)
		if e.OpType != "" {
			msg += " (" + e.OpType + ")"
		}
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap exposes the Kind (for the sentinels) and the Cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}

// nodeError is a Run failure of node n: err itself when it already names a node (a node of a
// subgraph n ran, say), else err with n attached (a copy of an *Error, or a new *Error of
// kind ErrInvalidArgument wrapping any other error).
func NodeError(n *graph.Node, err error) error {
	if e, ok := err.(*Error); ok {
		if e.Node != "" || e.OpType != "" {
			return err
		}
		c := *e
		c.Node, c.OpType = n.Name, n.OpType
		if c.Op == "" {
			c.Op = "Run"
		}
		return &c
	}
	return &Error{Op: "Run", Kind: ErrInvalidArgument, Node: n.Name, OpType: n.OpType, Cause: err}
}

// PanicError is the Cause of a run's *Error (of kind ErrInternal) when an operator panicked:
// the panic value and the stack of the goroutine at the panic. Error gives the value, then
// the stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", p.Value, p.Stack)
}

// Unwrap exposes the panic value when it is an error (a runtime.Error, say).
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// NodePanicError is the error of a run whose node n panicked with value v; stack is the
// panicking goroutine's stack (debug.Stack in the deferred recover).
func NodePanicError(n *graph.Node, v any, stack []byte) *Error {
	return &Error{Op: "Run", Kind: ErrInternal, Node: n.Name, OpType: n.OpType,
		Message: "the operator panicked (a bug; the session stays usable)", Cause: &PanicError{Value: v, Stack: stack}}
}

// RunPanicError is the *Error of kind ErrInternal for a panic of the run path outside any
// node (op is the call: Run, RunInto, ...), with the value and stack in its *PanicError cause.
func RunPanicError(op string, v any, stack []byte) *Error {
	return &Error{Op: op, Kind: ErrInternal, Message: "the run panicked outside any node (a bug; the session stays usable)",
		Cause: &PanicError{Value: v, Stack: stack}}
}

// newNodeError is newError for a failure that belongs to node n.
func NewNodeError(op string, kind error, n *graph.Node, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Node: n.Name, OpType: n.OpType, Message: sprintf(format, args...)}
}

// canceledError is the error of a run that ctx stopped before node n (nil when the run stopped
// before any node or after the last): Kind is ctx.Err(), Cause the cause given to
// context.WithCancelCause when there is another.
func CanceledError(op string, ctx context.Context, n *graph.Node) *Error {
	kind := ctx.Err()
	if kind == nil {
		kind = context.Canceled
	}
	e := &Error{Op: op, Kind: kind, Message: "the run's context is done"}
	if cause := context.Cause(ctx); cause != nil && cause != kind {
		e.Cause = cause
	}
	if n != nil {
		e.Node, e.OpType = n.Name, n.OpType
		e.Message = "the run's context is done; stopped before this node"
	}
	return e
}

func NewError(op string, kind error, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Message: sprintf(format, args...)}
}

func WrapError(op string, kind error, cause error, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Message: sprintf(format, args...), Cause: cause}
}

// sprintf formats only when there are arguments, so messages may contain '%' verbatim.
func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// joinErrors folds the errors of a multi-step Close into one (nil when all are nil).
func JoinErrors(op string, errs []error) error {
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	return WrapError(op, ErrDevice, err, "releasing failed")
}
