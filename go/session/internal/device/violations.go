package device

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// Session-supplied violation words.
//
// A kernel ORs the bits of the bounds checks that failed into its launch's violation word
// (docs/loom.md, "Bounds and the violation word"); an access that fails one is skipped, so
// the kernel's output is incomplete. A Dispatch that binds no Violation region of its own and
// does not set IgnoreViolations gets a word from its owner instead: each command list with
// such dispatches (a recording of a ModelSession, a slot of a prepared fragment, a list that
// IssueOnce runs) has one host-visible allocation of one 4-byte word per such dispatch. The
// words start zero; after the work that uses them has completed, the owner reads them (host
// memory: no device copy, one pass over a few words), turns the first nonzero one into an
// error and zeroes them again.
//
// Each dispatch has a word of its own, so the words add no dependency between commands: the
// word is declared as a read_write use of its own 4 bytes of a pseudo-allocation
// (sessionWordsAlloc), which no other command touches. Consecutive launches of one list on
// one stream are ordered anyway, and their bits accumulate until the words are read.

// sessionWordsAlloc is the allocation index under which the dependency tracker sees the
// session's violation words of a command list: not an allocation of the session, and never
// shared with another command (each dispatch has its own 4 bytes).
const sessionWordsAlloc = -1

// violationSite is a dispatch that writes a session-supplied violation word.
type violationSite struct {
	command int    // the dispatch's index in its command list
	kernel  string // the kernel's name in its signature
	symbol  string // the kernel's symbol in its module
	buffers []BufferParam
}

// violationWords are the session-supplied violation words of one command list.
type violationWords struct {
	buf   *native.Buffer // host-visible; word i (at 4*i) is sites[i]'s
	sites []violationSite
	what  string // the command list, for errors: `recording "step"`, "the fragment", ...
	// pending: launched since the words were last read (ModelSession.pending holds it).
	pending bool
	// transient: made for one IssueOnce; freed once read.
	transient bool
}

// attachViolationWords gives every dispatch of commands that asked for a session word (see
// preparedCommand.sessionWord) its own word in a fresh host-visible allocation of ctx, zeroed,
// and declares it among the dispatch's uses. It returns nil when no dispatch asked for one.
func attachViolationWords(op string, ctx *ModelContext, commands []preparedCommand, what string) (*violationWords, error) {
	n := 0
	for i := range commands {
		if commands[i].sessionWord != nil {
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	buf, err := ctx.alloc(op, native.SharedMemory, uint64(4*n))
	if err != nil {
		return nil, err
	}
	clear(buf.Bytes()) // idle: no work uses it yet
	w := &violationWords{buf: buf, sites: make([]violationSite, 0, n), what: what}
	for i := range commands {
		p := &commands[i]
		if p.sessionWord == nil {
			continue
		}
		at := uint64(4 * len(w.sites))
		site := *p.sessionWord
		site.command = i
		w.sites = append(w.sites, site)
		p.params.Violation, p.params.ViolationOffset = buf, at
		p.uses = append(p.uses, byteUse{alloc: sessionWordsAlloc, start: at, end: at + 4, access: AccessReadWrite})
	}
	return w, nil
}

// check reads the words, once the work that writes them has completed, and zeroes them. It
// returns an ErrInvalidArgument error (the kind an InferenceSession gives a bounds-check
// violation) naming the first dispatch whose word is nonzero, its kernel and what its bits
// say, or nil when every word is zero.
func (w *violationWords) check(op string) error {
	if w == nil || w.buf == nil {
		return nil
	}
	words := w.buf.Bytes()
	var first *violationSite
	var firstBits uint32
	more := 0
	for i := range w.sites {
		bits := binary.NativeEndian.Uint32(words[4*i:])
		if bits == 0 {
			continue
		}
		binary.NativeEndian.PutUint32(words[4*i:], 0)
		if first == nil {
			first, firstBits = &w.sites[i], bits
		} else {
			more++
		}
	}
	if first == nil {
		return nil
	}
	kernel := fmt.Sprintf("%q", first.kernel)
	if first.symbol != "" && first.symbol != first.kernel {
		kernel += " (symbol " + first.symbol + ")"
	}
	also := ""
	if more > 0 {
		also = fmt.Sprintf("; %d more dispatches of it failed bounds checks too", more)
	}
	return tensor.NewError(op, tensor.ErrInvalidArgument,
		"command %d of %s, a dispatch of kernel %s, failed a bounds check: %s, so its output is incomplete%s (set Dispatch.IgnoreViolations or bind Dispatch.Violation to check the bits yourself)",
		first.command, w.what, kernel, violationReason(first.buffers, firstBits), also)
}

// free releases the words' allocation. Idempotent.
func (w *violationWords) free(ctx *ModelContext) error {
	if w == nil || w.buf == nil {
		return nil
	}
	buf := w.buf
	w.buf = nil
	return ctx.free(buf)
}

// violationReason says what a violation word reports (docs/loom.md, "Bounds and the violation
// word"), naming the kernel's buffer parameters: the text of ops.ViolationReason, for a
// kernel of a ModelSession rather than an op's.
func violationReason(buffers []BufferParam, bits uint32) string {
	return DescribeViolation(bits, func(b int) string {
		if b < len(buffers) && buffers[b].Name != "" {
			return fmt.Sprintf("binding %d (%s)", b, buffers[b].Name)
		}
		return fmt.Sprintf("binding %d", b)
	})
}

// DescribeViolation says what the bits of a violation word mean (docs/loom.md, "Bounds and
// the violation word"), naming a binding b with binding(b): the accesses skipped, by binding,
// and the other checks that failed, then the bits ("... (violation bits 0x5)").
func DescribeViolation(bits uint32, binding func(b int) string) string {
	var what, skipped []string
	for b := 0; b < 23; b++ {
		if bits&(1<<b) != 0 {
			skipped = append(skipped, binding(b))
		}
	}
	if bits&(1<<23) != 0 {
		skipped = append(skipped, "a binding from 23 on")
	}
	if len(skipped) > 0 {
		what = append(what, "accesses outside "+strings.Join(skipped, ", ")+" were skipped (an index out of range)")
	}
	for _, f := range []struct {
		bit  uint32
		text string
	}{
		{1 << 24, "an access outside the block's shared memory was skipped"},
		{1 << 25, "an access outside a local array was skipped"},
		{1 << 28, "a view does not fit its operand (an operand smaller than the shapes the kernel was given)"},
		{1 << 29, "an assumption about the operands does not hold"},
		{1 << 30, "the launch does not match the kernel's launch program or bindings"},
	} {
		if bits&f.bit != 0 {
			what = append(what, f.text)
		}
	}
	if len(what) == 0 {
		what = append(what, "unknown bits")
	}
	return fmt.Sprintf("%s (violation bits 0x%x)", strings.Join(what, "; "), bits)
}

// ---------------------------------------------------------------- in a ModelSession

// launched notes that work writing w was enqueued on the session's stream: the next call that
// waits for the stream reads w (checkViolations). The caller holds s.mu.
func (s *ModelSession) launched(w *violationWords) {
	if w != nil && !w.pending {
		w.pending = true
		s.pending = append(s.pending, w)
	}
}

// checkViolations reads the words of every command list launched since the last check, once
// the stream is idle (the caller has just synchronized it and holds s.mu), zeroes them, frees
// the transient ones, and returns the first violation as an error. A violation does not latch
// the session: the stream is fine, only a kernel's output is incomplete.
func (s *ModelSession) checkViolations(op string) error {
	var first error
	var errs []error
	for _, w := range s.pending {
		w.pending = false
		if err := w.check(op); err != nil && first == nil {
			first = err
		}
		if w.transient {
			errs = append(errs, w.free(s.ctx))
		}
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	if first != nil {
		return first
	}
	return tensor.JoinErrors(op, errs)
}

// dropPending forgets the words launched since the last check without reading them, freeing
// the transient ones (the session is closing or resetting).
func (s *ModelSession) dropPending() []error {
	var errs []error
	for _, w := range s.pending {
		w.pending = false
		if w.transient {
			errs = append(errs, w.free(s.ctx))
		}
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	return errs
}
