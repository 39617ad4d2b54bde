package exec

import (
	"maps"

	"github.com/loomrt/loom/go/loom"
)

// Keeping the kernels the cache compiles, for an EP context model (epcontext.go).

// keptKernel is a kernel the kernel cache compiled while it kept artifacts (StartKeeping).
type keptKernel struct {
	File, Symbol string
	Config       map[string]string
	Artifact     *loom.Artifact
}

// keepArtifact records a compiled kernel while the cache keeps them; c.mu is held.
func (c *KernelCache) keepArtifact(key, file, symbol string, config map[string]string, a *loom.Artifact) {
	if c.kept == nil {
		return
	}
	c.kept[key] = keptKernel{File: file, Symbol: symbol, Config: maps.Clone(config), Artifact: a}
}

// StartKeeping makes the cache record the artifact of every kernel it compiles from now on.
func (c *KernelCache) StartKeeping() {
	c.Mu.Lock()
	c.kept = map[string]keptKernel{}
	c.Mu.Unlock()
}

// StopKeeping drops the recorded artifacts and stops recording.
func (c *KernelCache) StopKeeping() {
	c.Mu.Lock()
	c.kept = nil
	c.Mu.Unlock()
}

// KeptList returns the recorded kernels, in no order.
func (c *KernelCache) KeptList() []keptKernel {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	kept := make([]keptKernel, 0, len(c.kept))
	for _, k := range c.kept {
		kept = append(kept, k)
	}
	return kept
}
