package session

import (
	"os"

	"github.com/loomrt/loom/go/graph"
)

// Temporary (helper h4b): run the real models with Conv/FusedConv on the host, to check the
// recurrent kernels while another helper's conv kernel takes long to compile.
func init() {
	if os.Getenv("H4B_NOCONV") == "" {
		return
	}
	delete(kernelPlanners, "Conv")
	delete(kernelPlanners, graph.LoomDomain+":FusedConv")
	kernelOps["Conv"] = hostOps["Conv"]
	loomOps["FusedConv"] = fusedConvHost
}
