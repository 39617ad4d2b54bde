package plan

import (
	"sync"

	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// ForgetFolds drops the folded constants ShapeTrace keeps (the session's Close).
func (pe *Env) ForgetFolds() {
	pe.constFolds.Clear()
	pe.heldFolds.Clear()
}

// holdFolds notes the memory of folded values the session keeps (constFolds).
func (pe *Env) holdFolds(outs []tensor.Tensor) {
	for _, o := range outs {
		if raw, ok := ops.RawBytes(o); ok && len(raw) > 0 {
			pe.heldFolds.Store(device.WeightKey(raw), true)
		}
	}
}

// sessionHeld reports whether raw is the memory of a value the session holds for all its
// plans (a weight, or a value folded from weights alone): its device copy is kept once no
// plan instance binds it (device.SharedWeight's keep), since later plans read it again.
func (pe *Env) sessionHeld(raw []byte) bool {
	pe.weightsOnce.Do(func() {
		pe.weightMemory = map[device.SharedWeightKey]bool{}
		for _, w := range pe.Eng.Weights {
			if tensor.RelaidOf(w) != nil {
				continue // bound unpacked, a copy (device.UnpackedKey)
			}
			if wr, ok := ops.RawBytes(w); ok && len(wr) > 0 {
				pe.weightMemory[device.WeightKey(wr)] = true
			}
		}
	})
	key := device.WeightKey(raw)
	if pe.weightMemory[key] {
		return true
	}
	_, ok := pe.heldFolds.Load(key)
	return ok
}

// Env is what the compiled run plans need of an InferenceSession, besides its engine:
// the device copies of the weights, the output memory handed back for reuse, and the inputs
// whose values decide shapes or control flow.
type Env struct {
	Eng *exec.Engine
	// OutputNames are the graph outputs, in order.
	OutputNames []string
	// Recycled is output memory handed back with Recycle, for later runs' outputs.
	Recycled recycledOutputs
	// PlanWeights are the device copies of the weights the compiled run plans read, shared by
	// all their instances.
	PlanWeights device.SharedWeights
	// Derived are the constants the plans' kernels read in a layout of their own (MatMul's
	// packed weights), made once for all the plans (see ops.DerivedConsts).
	Derived ops.DerivedConsts
	// KeepDerived lets the planners derive such layouts (session.OptionPackWeights).
	KeepDerived bool
	// DeviceArenas keeps every instance's arena in device memory (a provider whose Memory is
	// DeviceMemory: CUDA and its stand-in): values stay on the device between kernel steps,
	// and data crosses only at the seams, the fed inputs kernels read, the values host steps
	// read from kernels or hand to them, and the outputs kernels write (see seams.go).
	DeviceArenas bool
	// Arenas are the host arenas the runs of plans with large arenas share (arenas.go); nil:
	// every instance's runs use its own.
	Arenas *ArenaPool
	// constFolds are the outputs of the folded nodes that read only weights (directly or
	// through other such nodes), by node: the same for every signature, so ShapeTrace runs
	// each once a session. Close drops them with the session's other references.
	constFolds sync.Map // *graph.Node -> []tensor.Tensor
	heldFolds  sync.Map // device.SharedWeightKey -> true: constFolds' memory
	// weightMemory is the memory of Eng.Weights (sessionHeld), noted on first use.
	weightMemory map[device.SharedWeightKey]bool
	weightsOnce  sync.Once
	// control are the inputs whose values decide shapes or control flow (ControlInputs).
	control     map[string]bool
	controlOnce sync.Once
}
