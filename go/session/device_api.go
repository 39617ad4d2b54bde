package session

import (
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
)

// Access is how a command uses the bytes of a region: it only reads them, only writes them,
// or both. Dependencies between recorded commands are inferred from these declarations alone,
// so a kernel must not touch memory beyond what its bindings declare.
type Access = device.Access

// AccessRead: the command reads the region and leaves it unchanged.
const AccessRead = device.AccessRead

// AccessReadWrite: the command reads the region and writes it.
const AccessReadWrite = device.AccessReadWrite

// AccessWrite: the command writes the region (it may leave bytes unchanged, but never
// depends on their earlier contents).
const AccessWrite = device.AccessWrite

// Binding is a region bound to a kernel's buffer parameter with the access the dispatch
// declares. The declaration is what dependency inference uses, so it must cover what the
// kernel does: a kernel parameter declared write or read_write needs Write or ReadWrite.
type Binding = device.Binding

// BufferParam is a buffer parameter of a kernel: its name and the access the kernel declares.
type BufferParam = device.BufferParam

// Command is one step of a recording: a Dispatch, a Fill or a Copy.
type Command = device.Command

// Compiler is a Loom compiler paired with the code target it compiles for.
type Compiler = device.Compiler

// Copy copies Src to Dst, which must have the same length and must not overlap.
type Copy = device.Copy

// Dispatch launches a kernel. Args are the device function's scalar arguments as raw bits
// (math.Float32bits for f32, two's complement for signed integers), one per scalar parameter;
// Workload is the launch program's arguments, also as bits, from which LaunchConfig computes
// the shape; Bindings bind the kernel's buffer parameters, in order, to regions with the
// access the dispatch declares.
type Dispatch = device.Dispatch

// Distribution summarizes timing samples by nearest rank.
type Distribution = device.Distribution

// Fill sets every byte of Region to Byte.
type Fill = device.Fill

// ForwardTimings compares replaying a recording's graph with issuing the same prepared
// commands one by one.
type ForwardTimings = device.ForwardTimings

// Fragment is a validated command list of a definition with the regions its callers write
// before each run (inputs) and read after it (outputs).
type Fragment = device.Fragment

// InContext makes a session in ctx, sharing its device, compiler and budget.
func InContext(ctx *device.ModelContext) (*device.ModelSession, error) { return device.InContext(ctx) }

// KernelID names a kernel of a session (from Compile or ImportKernel). It stays valid in the
// ModelDefinition frozen from the session.
type KernelID = device.KernelID

// KernelSignature is what a session needs to know of a kernel to dispatch it: its buffer
// parameters with their access modes, the layout of its scalar blob, and its launch rule.
// Compile derives it from the Loom artifact; ImportKernel takes it from the caller.
type KernelSignature = device.KernelSignature

// KernelSource is one kernel to compile: Loom source text (Name is its file name, for
// messages) and its Specialization: the kernel's symbol (empty when the source declares one
// kernel) and the values of its specialization constants.
type KernelSource = device.KernelSource

// LaunchConfig is the shape of a dispatch: what a kernel's launch program computes from a
// workload. As in go/native, a zero Y or Z counts as 1; a zero grid X is an empty launch,
// which a recording keeps as a node that does nothing.
type LaunchConfig = device.LaunchConfig

// MinBenchmarkSamples is the fewest samples Benchmark and ProfileCommands take.
const MinBenchmarkSamples = device.MinBenchmarkSamples

// ModelContext is what model sessions and definitions on one device share: the device (the
// device runtime every stream, buffer and module is created on), a Loom compiler for the
// device's target, created on first use, and an allocation budget. Every allocation made in
// the context is charged to the budget before it is made and credited back when it is freed;
// one that would exceed the budget fails with ErrOverBudget and allocates nothing.
//
// A ModelContext is safe for concurrent use. Close it after the sessions and definitions made
// in it.
type ModelContext = device.ModelContext

// ModelDefinition is a frozen model: its weights and kernels, and the sizes of its other
// allocations, from which Prepare makes any number of independent copies (slots) that run
// concurrently. Make one with ModelSession.Freeze; regions and kernel ids of the frozen
// session stay valid in it.
type ModelDefinition = device.ModelDefinition

// ModelSession builds and runs one model on one device: it allocates memory (device-local,
// host-visible, or immutable weights), compiles Loom kernels, records command lists into
// graphs whose edges it infers from the commands' declared bindings, replays them, and reads
// results back. Freeze turns it into a ModelDefinition that can run many copies at once.
//
// Its work runs in order on one stream of its own. When any operation on that stream fails,
// the session latches failed: every later call returns an error matching ErrFailed (with the
// stream's failure as its cause); only Close still works.
//
// A kernel that skips an access at a bounds check is an error by default: unless a Dispatch
// binds a Violation word of its own or sets IgnoreViolations, the session gives it a word and
// the next call that waits for its work (Synchronize, Read, ReadMany, Freeze) returns an
// error matching ErrInvalidArgument that names the command, the recording and the kernel.
// That error does not fail the session.
//
// The methods are safe for concurrent use; they are serialized.
type ModelSession = device.ModelSession

// NewContext makes a context on dev (which stays the caller's, to close after the context)
// with an allocation budget in bytes (Unlimited for none).
func NewContext(dev *native.Device, budget uint64) (*device.ModelContext, error) {
	return device.NewContext(dev, budget)
}

// OnBackend selects the backend whose device index Open opens: native.BackendHost (the
// default) or native.BackendCUDA, which makes Open(i, OnBackend(native.BackendCUDA)) open
// CUDA device i.
func OnBackend(b native.Backend) device.Option { return device.OnBackend(b) }

// Open opens device index of the host backend (or of the backend chosen with OnBackend) in a
// context of its own, which the session closes with itself.
func Open(index int, opts ...device.Option) (*device.ModelSession, error) {
	return device.Open(index, opts...)
}

// OpenFor is Open, refusing (ErrTargetMismatch) a device whose code target is not
// expectedTarget, for code compiled ahead of time for that target.
func OpenFor(index int, expectedTarget string, opts ...device.Option) (*device.ModelSession, error) {
	return device.OpenFor(index, expectedTarget, opts...)
}

// Option configures the ModelSession that Open, OpenFor or WithCompiler makes (OnBackend,
// WithBudget, WithWorkerThreads). An InferenceSession is configured by LoadOptions instead.
type Option = device.Option

// Prepared is a set of slots of one fragment.
type Prepared = device.Prepared

// ReadRequest asks ReadMany for the leading len(Dst) bytes of Region.
type ReadRequest = device.ReadRequest

// Region is a byte range of one allocation of a session: a small value, cheap to copy. Only
// the session's allocation methods make regions, and Slice narrows them; every method that
// takes a region checks that it belongs to that session and lies inside its allocation.
type Region = device.Region

// ScalarParam is a scalar parameter of a kernel's device function: its name, its size in
// bytes (1, 2, 4 or 8) and its byte offset in the scalar blob (see KernelSignature.BlobBytes).
type ScalarParam = device.ScalarParam

// Slot is one copy of a fragment at fixed addresses: its own scratch (inputs and outputs
// included), graph and stream, sharing the definition's weights and kernels. Different slots
// run concurrently; one slot runs one Run at a time.
type Slot = device.Slot

// Unlimited is a context budget without a limit.
const Unlimited = device.Unlimited

// WithBudget sets the allocation budget, in bytes, of the context Open makes (default
// Unlimited).
func WithBudget(bytes uint64) device.Option { return device.WithBudget(bytes) }

// WithCompiler makes a session on dev (which stays the caller's) that compiles with compiler
// (also the caller's, to close after the session). It refuses a compiler whose target differs
// from the device's, before any code is compiled or loaded.
func WithCompiler(dev *native.Device, compiler device.Compiler, opts ...device.Option) (*device.ModelSession, error) {
	return device.WithCompiler(dev, compiler, opts...)
}

// WithWorkerThreads sets the host backend's worker threads (default: the hardware
// concurrency). Ignored by CUDA.
func WithWorkerThreads(n int) device.Option { return device.WithWorkerThreads(n) }
