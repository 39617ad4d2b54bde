// Package session runs ONNX models on Loom's native runtime (go/native). Most programs need only
// InferenceSession (Load, then Run); ModelSession, further down, is the lower-level API that
// builds a model from Loom kernels and device commands by hand.
//
// # InferenceSession
//
// An InferenceSession runs an ONNX model: Load (a file), LoadBytes or FromGraph (a go/graph
// model) make one; Run feeds it named tensors and returns its outputs in the order of Outputs.
//
//	s, err := session.Load("model.onnx", session.WithExecutionProvider(session.ProviderHost))
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	x := session.MustTensor([]int64{1, 3}, []float32{1, 2, 3})
//	outs, err := s.Run(ctx, []session.NamedTensor{{Name: "x", Tensor: x}})
//	if err != nil {
//		return err
//	}
//	y, err := session.TensorOf[float32](outs[0])
//
// Inputs and Outputs describe what a run takes and returns (IOMeta: name, element type,
// declared shape). LoadOptions configure a session (WithExecutionProvider, WithOptimizationLevel,
// WithIntraOpThreads, WithTracerProvider, WithLimits, and WithOption for ONNX Runtime's string
// session options); Open and its relatives take Options instead, a distinct type, since they
// configure a ModelSession (below).
//
// Run, RunSelected (only the outputs named, in that order), RunInto (outputs into tensors the
// caller allocated), RunValues (sequence and optional values) and Warmup take a context: a run stops between ops once it is done, and is traced
// when it carries an OpenTelemetry span. Runs are safe for concurrent use. A symbolic dimension
// (a dynamic batch, say) takes its size from each run's inputs: the first run of each new input
// shape is interpreted while it builds that shape's compiled plan, so it is slower than the
// runs after it, and a session plans at most 16 shapes: runs of further shapes stay in the
// interpreter (docs/execution.md).
// The examples ExampleLoad_quickStart (the README's quick start), ExampleLoad,
// ExampleInferenceSession_Run_dynamicBatch, ExampleInferenceSession_RunSelected,
// ExampleInferenceSession_RunInto and ExampleWithTracerProvider show whole programs.
//
// # ModelSession
//
// A ModelSession builds a model on one device from kernels and commands, and runs it:
//
//   - Open(i) opens host device i in a context of its own; Open(i, OnBackend(native.BackendCUDA))
//     opens CUDA device i instead. OpenFor(i, target) also refuses a device whose code target is
//     not target; WithCompiler(dev, compiler) uses a caller's device and compiler, refusing a
//     compiler for another target before any code is loaded; InContext(ctx) shares a
//     ModelContext with other sessions.
//   - Allocate (device-local), AllocateShared (coherent, host-visible) and Weight (uploaded once,
//     immutable) return Regions: small values {session, allocation, offset, bytes} that Slice
//     narrows and Read/Write/ReadWrite bind to kernel parameters.
//   - Compile compiles Loom kernels; ImportKernel adds ahead-of-time ones.
//   - Record(key, commands) turns Dispatch, Fill and Copy commands into a graph; Replay(key)
//     runs it; Upload, Read and ReadMany move bytes; Synchronize waits.
//   - A kernel that skips an access at a bounds check is an error: unless a Dispatch binds a
//     Violation word of its own (the caller checks it) or sets IgnoreViolations, the session
//     gives it a word, and the next call that waits for its work (Synchronize, Read, ReadMany,
//     Freeze; Slot.Run itself) returns an ErrInvalidArgument error naming the command, the
//     recording and the kernel. It does not fail the session.
//   - Benchmark compares graph replay with issuing the same commands one by one;
//     ProfileCommands times each command alone.
//
// # Dependency inference
//
// A recorded graph has exactly the edges the commands' declared bindings imply, worked out per
// allocation at byte granularity: a read waits for the last writer of every byte it touches; a
// write (or read_write) waits for that writer and for every reader since; commands on disjoint
// bytes get no edge, even in the same allocation; the bindings of one command apply in
// declaration order and a command never waits for itself. Fills write their region; copies
// read their source and write their destination. Kernels must therefore touch only the bytes
// their bindings declare: a kernel's buffer pointer reaches to the end of the allocation (the
// shim's ABI passes no region length), so a kernel is trusted to stay inside its region through
// its own size arguments.
//
// # Contexts, definitions and slots
//
// A ModelContext holds what sessions on one device share: the device, a Loom compiler created
// on first use, and an allocation budget that every allocation is charged against before it is
// made. ModelSession.Freeze turns a built session into a ModelDefinition: the weights are kept
// (and charged once), every other allocation becomes scratch of the same size, and the kernels
// are kept. ModelDefinition.Fragment validates a command list with its inputs and outputs, and
// Fragment.Prepare makes slots: fixed-address copies with private scratch, graph and stream
// that run concurrently.
//
// # Failures
//
// Every error is an *Error matching one of the Err* sentinels with errors.Is (a run stopped by
// its context matches context.Canceled or context.DeadlineExceeded instead); a failure that
// belongs to a graph node names it (Error.Node, Error.OpType). When an operation
// on a session's stream fails, the session latches failed: every later call returns ErrFailed
// with the stream's failure as the cause, and only Close remains useful. Slots latch the same
// way, independently of each other.
package session
