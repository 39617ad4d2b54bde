package loom

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/loomrt/loom/go/loom/ast"
	"github.com/loomrt/loom/go/loom/codegen"
	"github.com/loomrt/loom/go/loom/ir"
	"github.com/loomrt/loom/go/loom/parser"
	"github.com/loomrt/loom/go/loom/passes"
	"github.com/loomrt/loom/go/loom/types"
)

type frontendResult struct {
	kernel *types.Kernel
	fn     *ir.Func
	launch *ir.Launch
	code   *ir.LaunchCode
	ck     *codegen.Kernel
	source string
	irText string
	bce    passes.BCEStats
}

func parse(src KernelSource) (*ast.File, error) {
	name := src.Name
	if name == "" {
		name = "<source>"
	}
	return parser.ParseFile(name, src.Source)
}

// resolveSymbol returns the specialization's symbol, or the file's only kernel.
func resolveSymbol(src KernelSource) (string, error) {
	if src.Specialization.Symbol != "" {
		return src.Specialization.Symbol, nil
	}
	f, err := parse(src)
	if err != nil {
		return "", err
	}
	names := types.Kernels(f)
	if len(names) != 1 {
		return "", fmt.Errorf("%s: name the kernel to compile (Specialization.Symbol); the file declares %d: %s", src.Name, len(names), strings.Join(names, ", "))
	}
	return names[0], nil
}

// frontend runs the compiler from source to generated C (or CUDA C).
func frontend(src KernelSource, target Target, dump passes.Dump) (*frontendResult, error) {
	return frontendText(src, target, dump, true)
}

// frontendText is frontend, with the IR's text (frontendResult.irText: the artifact's IR)
// printed only when withIR says (printing it took 7% of the shipped kernels' front ends).
func frontendText(src KernelSource, target Target, dump passes.Dump, withIR bool) (*frontendResult, error) {
	f, err := parse(src)
	if err != nil {
		return nil, err
	}
	symbol := src.Specialization.Symbol
	if symbol == "" {
		if symbol, err = resolveSymbol(src); err != nil {
			return nil, err
		}
	}
	k, err := types.Check(f, symbol, src.Specialization.Config)
	if err != nil {
		return nil, err
	}
	fn, l, err := ir.Build(k)
	if err != nil {
		return nil, err
	}
	passes.OptimizeLaunch(l)
	st, err := passes.Optimize(fn, dump)
	if err != nil {
		return nil, err
	}
	code, err := ir.FlattenLaunch(l)
	if err != nil {
		return nil, fmt.Errorf("%s: kernel %s: %w", k.Filename, symbol, err)
	}
	r := &frontendResult{kernel: k, fn: fn, launch: l, code: code, bce: st}
	if withIR {
		r.irText = l.String() + "\n" + fn.String()
	}

	ck := &codegen.Kernel{Symbol: symbol, Func: fn, Target: target.String()}
	var scalarTypes []*types.Basic
	for i, p := range k.Params {
		switch t := p.Type.(type) {
		case *types.Buffer:
			ck.Buffers = append(ck.Buffers, codegen.Buffer{Name: p.Name, Elem: t.Elem, Access: t.Access, Binding: p.Binding, Value: fn.Params[i]})
		case *types.Basic:
			scalarTypes = append(scalarTypes, t)
		}
	}
	offsets, scalarBytes, hidden, blob := codegen.Layout(scalarTypes, len(ck.Buffers), target.Kind == TargetCUDA)
	j := 0
	for i, p := range k.Params {
		if t, ok := p.Type.(*types.Basic); ok {
			ck.Scalars = append(ck.Scalars, codegen.Scalar{Name: p.Name, Type: t, Offset: offsets[j], Value: fn.Params[i]})
			j++
		}
	}
	ck.ScalarBytes, ck.HiddenOffsets, ck.BlobBytes = scalarBytes, hidden, blob
	r.ck = ck
	lang := codegen.Host.ForVectorBytes(target.VectorBytes())
	if target.Kind == TargetCUDA {
		lang = codegen.CUDA
	}
	if r.source, err = codegen.Emit(ck, lang); err != nil {
		return nil, fmt.Errorf("%s: kernel %s: %w", k.Filename, symbol, err)
	}
	return r, nil
}

// artifact describes a front-end result (the code itself is attached by the caller).
func (r *frontendResult) artifact(key string, target Target) *Artifact {
	k := r.kernel
	a := &Artifact{
		Target:         target.String(),
		Kernel:         k.Name,
		Entry:          k.Name,
		Key:            key,
		Specialization: map[string]string{},
		ScalarBytes:    r.ck.ScalarBytes,
		BlobBytes:      r.ck.BlobBytes,
		HiddenOffsets:  r.ck.HiddenOffsets,
		Launch:         r.code,
		Source:         r.source,
		IR:             r.irText,
		Checks:         CheckStats{Accesses: r.bce.Accesses, Proven: r.bce.Proven, Remaining: r.bce.Checks},
	}
	if target.Kind == TargetCUDA {
		a.Entry = codegen.EntryName(k.Name)
	}
	for _, s := range k.Spec {
		a.Specialization[s.Name] = s.Text()
	}
	scalar := 0
	for i, p := range k.Params {
		prm := Param{Name: p.Name}
		switch t := p.Type.(type) {
		case *types.Buffer:
			prm.Kind = ParamBuffer
			prm.Type = t.Elem.String()
			prm.Access = t.Access.String()
			prm.Binding = p.Binding
			prm.Size = t.Elem.Size()
		case *types.Basic:
			prm.Kind = ParamScalar
			prm.Type = t.String()
			prm.Offset = r.ck.Scalars[scalar].Offset
			prm.Size = t.Size()
			prm.Binding = -1
			scalar++
		}
		_ = i
		a.Params = append(a.Params, prm)
	}
	for i, w := range k.Workload {
		a.Workload = append(a.Workload, WorkloadParam{Name: w.Name, Type: w.Type.String(), Param: k.WorkloadDevice[i]})
	}
	return a
}

// EmitKind selects what Emit returns.
type EmitKind string

// Emit kinds, as the `loom compile --emit` flag spells them.
const (
	EmitIR   EmitKind = "ir"   // the launch program and the optimized device IR
	EmitC    EmitKind = "c"    // host C
	EmitCUDA EmitKind = "cuda" // CUDA C
)

// Emit compiles src for target without building or caching anything and returns the requested
// text. EmitC needs a host target and EmitCUDA an sm_XX target.
func Emit(src KernelSource, target Target, kind EmitKind) (string, error) {
	switch kind {
	case EmitC:
		if target.Kind != TargetHost {
			return "", fmt.Errorf("loom: --emit c needs a host target, not %s", target)
		}
	case EmitCUDA:
		if target.Kind != TargetCUDA {
			return "", fmt.Errorf("loom: --emit cuda needs an sm_XX target, not %s", target)
		}
	case EmitIR:
	default:
		return "", fmt.Errorf("loom: unknown emit kind %q (want ir, c or cuda)", kind)
	}
	r, err := frontend(src, target, nil)
	if err != nil {
		return "", err
	}
	if kind == EmitIR {
		return r.irText, nil
	}
	return r.source, nil
}

// EmitStages returns the device IR after each pipeline stage (build, specialize, fold, unroll,
// scalarize, bce), for studying what the passes do.
func EmitStages(src KernelSource, target Target) ([]Stage, error) {
	var stages []Stage
	_, err := frontend(src, target, func(stage string, f *ir.Func) {
		stages = append(stages, Stage{Name: stage, IR: f.String()})
	})
	return stages, err
}

// Stage is the IR after one pipeline stage.
type Stage struct {
	Name string
	IR   string
}

// ReadSource reads a .loom file into a KernelSource for symbol (empty: the file's only kernel)
// under the specialization config.
func ReadSource(path, symbol string, config map[string]string) (KernelSource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return KernelSource{}, fmt.Errorf("loom: %w", err)
	}
	return KernelSource{Name: path, Source: data, Specialization: Specialization{Symbol: symbol, Config: config}}, nil
}

// ParseSpec reads `key=value` pairs (as given to --spec) into a specialization config.
func ParseSpec(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("loom: --spec %q: want key=value", p)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("loom: --spec %s given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// CompileFile is what `loom compile FILE.loom --target T --spec k=v [--emit ir|c|cuda]` does:
// it reads path, parses the target and the key=value pairs, and returns the emitted text when
// emit is set, or compiles (through the cache) and returns the artifact. symbol may be empty
// when the file declares one kernel.
func (c *Compiler) CompileFile(ctx context.Context, path, symbol, target string, spec []string, emit EmitKind) (string, *Artifact, error) {
	t, err := ParseTarget(target)
	if err != nil {
		return "", nil, fmt.Errorf("loom: %w", err)
	}
	config, err := ParseSpec(spec)
	if err != nil {
		return "", nil, err
	}
	src, err := ReadSource(path, symbol, config)
	if err != nil {
		return "", nil, err
	}
	if emit != "" {
		text, err := Emit(src, t, emit)
		return text, nil, err
	}
	art, err := c.CompileContext(ctx, src, t)
	return "", art, err
}

// Kernels lists the kernel names declared in a source.
func Kernels(src KernelSource) ([]string, error) {
	f, err := parse(src)
	if err != nil {
		return nil, err
	}
	names := types.Kernels(f)
	sort.Strings(names)
	return names, nil
}
