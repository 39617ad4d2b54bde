package session

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is; every error this package returns is an *Error matching one of them.
var (
	// ErrInvalidArgument: a bad size, region, kernel id, command or option.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrClosed: the session, context, definition or slot was closed (or frozen).
	ErrClosed = errors.New("closed")
	// ErrFailed: a stream operation of the session failed earlier; the session is latched
	// failed and refuses every call (Close still releases it).
	ErrFailed = errors.New("session failed")
	// ErrOverBudget: an allocation would exceed its context's budget.
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
)

// Error is a failed call: which method (Op), what kind of failure (Kind, one of the sentinels
// above), a message naming what is at fault, and the underlying error if any (for example the
// *native.Error of a failed stream operation).
type Error struct {
	Op      string
	Kind    error
	Message string
	Cause   error
}

// Error formats as "session: Op: kind: message: cause".
func (e *Error) Error() string {
	msg := "session: " + e.Op + ": " + e.Kind.Error()
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

func newError(op string, kind error, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Message: sprintf(format, args...)}
}

func wrapError(op string, kind error, cause error, format string, args ...any) *Error {
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
func joinErrors(op string, errs []error) error {
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	return wrapError(op, ErrDevice, err, "releasing failed")
}
