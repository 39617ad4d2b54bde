// Package device is ModelSession's layer of go/session: a resident model's storage (regions of
// device allocations, weights), its kernels (loaded, imported or compiled from Loom sources),
// the commands it issues and records into device graphs (with edges inferred from the byte
// regions each command reads and writes), the ModelContext that budgets device memory and
// compiles for its target, and ModelDefinition, a frozen session shared by instances. The
// hooks InferenceSession needs (per-run sessions reset for reuse, shared weights, recorded
// runs over caller memory) are exported functions here. Package session re-exports the public
// names; device imports only the tensor package of the session layer.
package device
