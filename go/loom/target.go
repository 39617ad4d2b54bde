package loom

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/cpu"
)

// TargetKind says which backend a target belongs to.
type TargetKind int

// Target kinds.
const (
	TargetHost TargetKind = iota + 1 // C compiled to a shared object, run on CPU worker threads
	TargetCUDA                       // CUDA C for an NVIDIA GPU (compiled by NVRTC at load time)
)

// Target is a code target: "host-x86_64-v3", "host-x86_64-v4", "host-aarch64-v8" or "sm_90".
type Target struct {
	Kind  TargetKind
	Arch  string // host: x86_64 or aarch64
	Level string // host: v1..v4 (x86_64), v8 (aarch64)
	SM    int    // CUDA: compute capability * 10 (sm_90 → 90)
}

// String spells the target as ParseTarget reads it.
func (t Target) String() string {
	switch t.Kind {
	case TargetHost:
		return "host-" + t.Arch + "-" + t.Level
	case TargetCUDA:
		return "sm_" + strconv.Itoa(t.SM)
	}
	return "invalid-target"
}

// ParseTarget reads a target name.
func ParseTarget(s string) (Target, error) {
	if strings.HasPrefix(s, "sm_") {
		n, err := strconv.Atoi(s[3:])
		if err != nil || n < 50 || n > 999 || s[3] == '0' {
			return Target{}, fmt.Errorf("target %q: want sm_XX with a compute capability of at least 5.0 (sm_50)", s)
		}
		return Target{Kind: TargetCUDA, SM: n}, nil
	}
	parts := strings.Split(s, "-")
	if len(parts) != 3 || parts[0] != "host" {
		return Target{}, fmt.Errorf("target %q: want host-<arch>-<level> (host-x86_64-v3) or sm_XX", s)
	}
	t := Target{Kind: TargetHost, Arch: parts[1], Level: parts[2]}
	switch t.Arch {
	case "x86_64":
		switch t.Level {
		case "v1", "v2", "v3", "v4":
		default:
			return Target{}, fmt.Errorf("target %q: x86_64 levels are v1, v2, v3 and v4", s)
		}
	case "aarch64":
		if t.Level != "v8" {
			return Target{}, fmt.Errorf("target %q: the aarch64 level is v8", s)
		}
	default:
		return Target{}, fmt.Errorf("target %q: host architectures are x86_64 and aarch64", s)
	}
	return t, nil
}

// MustParseTarget is ParseTarget for constants known to be valid; it panics otherwise.
func MustParseTarget(s string) Target {
	t, err := ParseTarget(s)
	if err != nil {
		panic(err)
	}
	return t
}

// HostTarget returns the target of this machine's CPU: the highest x86-64 micro-architecture
// level its features allow, or aarch64 v8.
func HostTarget() Target {
	switch runtime.GOARCH {
	case "arm64":
		return Target{Kind: TargetHost, Arch: "aarch64", Level: "v8"}
	case "amd64":
		return Target{Kind: TargetHost, Arch: "x86_64", Level: x86Level()}
	}
	return Target{Kind: TargetHost, Arch: runtime.GOARCH, Level: "v1"}
}

func x86Level() string {
	x := cpu.X86
	v2 := x.HasSSE3 && x.HasSSSE3 && x.HasSSE41 && x.HasSSE42 && x.HasPOPCNT && x.HasCX16
	v3 := v2 && x.HasAVX && x.HasAVX2 && x.HasBMI1 && x.HasBMI2 && x.HasF16C && x.HasFMA &&
		x.HasMOVBE && x.HasOSXSAVE && x.HasLZCNT
	v4 := v3 && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512CD && x.HasAVX512DQ && x.HasAVX512VL
	switch {
	case v4:
		return "v4"
	case v3:
		return "v3"
	case v2:
		return "v2"
	}
	return "v1"
}

// VectorBytes is the width of a host target's widest vector registers: 64 bytes for
// x86-64-v4 (AVX-512), 32 for v3 (AVX2), 16 for v1, v2 and aarch64 (SSE, NEON); 0 for CUDA.
func (t Target) VectorBytes() int {
	switch {
	case t.Kind != TargetHost:
		return 0
	case t.Arch == "x86_64" && t.Level == "v4":
		return 64
	case t.Arch == "x86_64" && t.Level == "v3":
		return 32
	}
	return 16
}

// hostFlags returns the C compiler's ISA flags for a host target.
func (t Target) hostFlags() []string {
	switch t.Arch {
	case "x86_64":
		switch t.Level {
		case "v1":
			return []string{"-march=x86-64"}
		case "v4":
			// clang tunes x86-64-v4 for 256-bit vectors: without the flag it splits a kernel's
			// 16-lane vectors into halves, and gemm_nn's 24 accumulators into 48 registers
			// that spill on every step of its k loop. GCC uses 512-bit registers for them
			// either way.
			return []string{"-march=x86-64-v4", "-mprefer-vector-width=512"}
		}
		return []string{"-march=x86-64-" + t.Level}
	case "aarch64":
		return []string{"-march=armv8-a"}
	}
	return nil
}

// CheckTarget returns an error unless the artifact was compiled for target.
func CheckTarget(a *Artifact, target Target) error {
	if a == nil {
		return fmt.Errorf("loom: no artifact")
	}
	if a.Target != target.String() {
		return fmt.Errorf("loom: kernel %s was compiled for %s, not %s", a.Kernel, a.Target, target)
	}
	return nil
}
