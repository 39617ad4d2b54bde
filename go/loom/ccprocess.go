package loom

import (
	"context"
	"os"
	"os/exec"
)

// ccCommand is one run of the C compiler, tied to ctx: in a process group of its own, so that
// cancelling ctx (a background compile dropped by a closing session) kills the driver and what
// it started (cc1, as, collect2, ld), and with TMPDIR set to tmp when tmp is not empty (the
// compilation's own directory, which the caller removes), so the intermediate files of a killed
// compile go with it. Killing only the driver, as exec.CommandContext does, left its children
// running and their /tmp/cc*.s, *.o and *.res files behind, a few for every cancelled compile.
func ccCommand(ctx context.Context, tmp, cc string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, cc, args...)
	if tmp != "" {
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	}
	ownProcessGroup(cmd)
	return cmd
}
