package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/epcontext"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels"
)

// EP context models (docs/epcontext.md). With ep.context_enable=1 a session, once built, warms
// up and writes a context model: an ONNX model whose graph is one com.microsoft EPContext node
// of source "loom" whose payload (the context blob, internal/epcontext) holds the optimized
// graph and every compiled kernel. Loading such a model skips optimization and compilation:
// the session runs the embedded graph with the kernels installed straight into its cache.

// The EPContext node's identity, as ONNX Runtime defines the contrib operator.
const (
	epContextOpType = "EPContext"
	epContextDomain = "com.microsoft"
	// epContextSource is the source attribute of the nodes Loom writes and the only one it runs.
	epContextSource = "loom"
)

// epContextBlobSuffix replaces ".onnx" in the context model's file name to name the blob file
// written beside it when ep.context_embed_mode=0.
const epContextBlobSuffix = "_loom.bin"

// EPContextPath is the path of the EP context model the session wrote when it was built with
// ep.context_enable=1; "" when it wrote none.
func (s *InferenceSession) EPContextPath() string { return s.epContextPath }

// defaultEPContextPath is the context model's path for a model file when ep.context_file_path
// is not set: the model's path with ".onnx" replaced by "_ctx.onnx", as ONNX Runtime does.
func defaultEPContextPath(modelPath string) string {
	return strings.TrimSuffix(modelPath, ".onnx") + "_ctx.onnx"
}

// fillEPContextOptions completes the ep.context_* options of a session that writes a context
// model: the file path (derived from modelPath, the file the model was loaded from, "" for a
// model from memory) and the embed mode (1, the EPContext operator's default).
func (s *InferenceSession) fillEPContextOptions(modelPath string) error {
	if s.options[OptionEPContextEnable] != "1" {
		return nil
	}
	if s.options[OptionEPContextFilePath] == "" {
		// For a model from memory there is no path to derive the context model's from.
		if modelPath == "" {
			return tensor.NewError("InferenceSession", tensor.ErrInvalidArgument, "session option %s=1 needs %s for a model loaded from memory (LoadBytes, FromGraph): there is no model file to derive the context model's path from",
				OptionEPContextEnable, OptionEPContextFilePath)
		}
		s.options[OptionEPContextFilePath] = defaultEPContextPath(modelPath)
	}
	if s.options[OptionEPContextEmbedMode] == "" {
		s.options[OptionEPContextEmbedMode] = "1"
	}
	return nil
}

// keptKernels returns the recorded kernels with their module images, sorted by cache key:
// host shared objects are read back from the Loom cache and checked against their digest.
func keptKernels(c *exec.KernelCache, backend native.Backend) ([]epcontext.Kernel, error) {
	kept := c.KeptList()
	out := make([]epcontext.Kernel, 0, len(kept))
	for _, k := range kept {
		src, err := kernels.Source(k.File)
		if err != nil {
			return nil, fmt.Errorf("kernel %s of %s: %w", k.Symbol, k.File, err)
		}
		sum := sha256.Sum256(src)
		a := *k.Artifact
		var image []byte
		if backend == native.BackendCUDA {
			image = []byte(a.Source)
		} else {
			if image, err = a.SharedObjectBytes(); err != nil {
				return nil, fmt.Errorf("kernel %s of %s: %w", k.Symbol, k.File, err)
			}
			if got := sha256.Sum256(image); hex.EncodeToString(got[:]) != a.SOSHA256 {
				return nil, fmt.Errorf("kernel %s of %s: the shared object %s changed since it was loaded (SHA-256 %x, want %s)",
					k.Symbol, k.File, a.SharedObject, got[:], a.SOSHA256)
			}
		}
		// The module image carries the code; the C or CUDA text and the IR are not needed to run.
		a.Source, a.IR, a.SharedObject = "", "", ""
		out = append(out, epcontext.Kernel{
			KernelRecord: epcontext.KernelRecord{File: k.File, Symbol: k.Symbol, Config: k.Config,
				SourceSHA256: hex.EncodeToString(sum[:]), Artifact: &a},
			Image: image,
		})
	}
	epcontext.SortKernels(out)
	return out, nil
}

// epContextWarmupShapes are the shapes the context warmup feeds: each input's declared shape
// with symbolic and unknown dimensions set to 1.
func (s *InferenceSession) epContextWarmupShapes() (map[string][]int64, error) {
	shapes := make(map[string][]int64, len(s.inputs))
	for _, m := range s.inputs {
		if !m.Ranked {
			return nil, tensor.NewError("InferenceSession", tensor.ErrInvalidArgument, "input %q has an unknown rank, so the kernels of an EP context model cannot be compiled ahead (%s=1 warms the session up with the declared input shapes)", m.Name, OptionEPContextEnable)
		}
		shape := make([]int64, len(m.Shape))
		for i, d := range m.Shape {
			shape[i] = 1
			if d.Known() {
				shape[i] = d.Value
			}
		}
		shapes[m.Name] = shape
	}
	return shapes, nil
}

// epContextNotes is the JSON of the EPContext node's notes attribute.
type epContextNotes struct {
	LoomTarget  string `json:"loom_target"`
	LoomBackend string `json:"loom_backend"`
	BlobFormat  string `json:"blob_format"`
	Kernels     int    `json:"kernels"`
}

// writeEPContext warms the session up with its declared input shapes, so that the kernels a run
// needs are compiled, then writes the context model to ep.context_file_path (and, for embed
// mode 0, the blob beside it). modelPath is the source model's file ("" for one from memory).
func (s *InferenceSession) writeEPContext(modelPath string) error {
	const op = "InferenceSession"
	path := s.options[OptionEPContextFilePath]
	embed := s.options[OptionEPContextEmbedMode] != "0"
	if modelPath != "" && epcontext.SameFile(modelPath, path) {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "session option %s %q is the source model itself; the context model would overwrite it", OptionEPContextFilePath, path)
	}
	shapes, err := s.epContextWarmupShapes()
	if err != nil {
		return err
	}
	s.eng.Kernels.StartKeeping()
	defer s.eng.Kernels.StopKeeping()
	if err := s.Warmup(context.Background(), shapes); err != nil {
		return tensor.WrapError(op, kindOf(err), err, "warming the session up for the EP context model (symbolic input dimensions set to 1)")
	}
	kernels, err := keptKernels(&s.eng.Kernels, s.dev.Backend())
	if err != nil {
		return tensor.WrapError(op, tensor.ErrCompile, err, "collecting the kernels of the EP context model")
	}
	graphBytes, err := s.marshalModel()
	if err != nil {
		return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "serializing the optimized graph for the EP context model")
	}
	g := s.eng.Model.Graph
	partition := "loom_" + g.Name
	if g.Name == "" {
		partition = "loom_graph"
	}
	target := s.dev.Target()
	blob, err := epcontext.Encode(&epcontext.Blob{
		Meta: epcontext.Meta{CompilerVersion: loom.CompilerVersion, Target: target, Backend: string(s.eng.Provider),
			PartitionName: partition, SourceModel: s.eng.Model.Name},
		Graph:   graphBytes,
		Kernels: kernels,
	})
	if err != nil {
		return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "encoding the EP context blob")
	}
	notes, err := json.Marshal(epContextNotes{LoomTarget: target, LoomBackend: string(s.eng.Provider),
		BlobFormat: fmt.Sprintf("%s/%d", epcontext.FormatName, epcontext.FormatVersion), Kernels: len(kernels)})
	if err != nil {
		return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "encoding the EPContext notes")
	}
	cache := &graph.Attribute{Name: "ep_cache_context", Type: graph.AttrString, String: blob}
	var blobPath string
	if !embed {
		name := strings.TrimSuffix(filepath.Base(path), ".onnx") + epContextBlobSuffix
		blobPath = filepath.Join(filepath.Dir(path), name)
		cache.String = []byte(name) // relative to the context model's directory
	}
	embedMode := int64(0)
	if embed {
		embedMode = 1
	}
	cg := &graph.Graph{Name: g.Name, Doc: g.Doc}
	var ins, outs []string
	for _, v := range g.Inputs {
		if v.Initializer != nil || g.Initializers[v.Name] != nil {
			continue // an overridable initializer stays in the embedded graph, not a required input
		}
		in := graph.Input(v.Name, v.Declared)
		in.Doc = v.Doc
		cg.Inputs = append(cg.Inputs, in)
		ins = append(ins, v.Name)
	}
	for _, v := range g.Outputs {
		o := graph.Output(v.Name, v.Declared)
		o.Doc = v.Doc
		cg.Outputs = append(cg.Outputs, o)
		outs = append(outs, v.Name)
	}
	node := graph.NewNode(partition, epContextOpType, ins, outs,
		graph.IntAttr("main_context", 1),
		cache,
		graph.IntAttr("embed_mode", embedMode),
		graph.StringAttr("source", epContextSource),
		graph.StringAttr("ep_sdk_version", loom.CompilerVersion),
		graph.StringAttr("partition_name", partition),
		graph.StringAttr("hardware_architecture", target),
		graph.StringAttr("notes", string(notes)),
	)
	node.Domain = epContextDomain
	cg.Nodes = []*graph.Node{node}
	src := s.eng.Model
	cm := &graph.Model{
		Name: filepath.Base(path), IRVersion: max(src.IRVersion, 7), ProducerName: src.ProducerName,
		ProducerVersion: src.ProducerVersion, Domain: src.Domain, ModelVersion: src.ModelVersion, Doc: src.Doc,
		MetadataProps: maps.Clone(src.MetadataProps), Opsets: map[string]int64{}, Graph: cg,
	}
	for d, v := range src.Opsets {
		if d != graph.LoomDomain { // the fused operators live only inside the blob's graph
			cm.Opsets[d] = v
		}
	}
	cm.Opsets[epContextDomain] = 1
	data, err := cm.Marshal()
	if err != nil {
		return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "serializing the EP context model")
	}
	// The blob first: a context model on disk always finds the blob it names.
	if blobPath != "" {
		if err := epcontext.WriteFileAtomic(blobPath, blob); err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "cannot write the EP context blob")
		}
	}
	if err := epcontext.WriteFileAtomic(path, data); err != nil {
		return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "cannot write the EP context model (session option %s)", OptionEPContextFilePath)
	}
	s.epContextPath = path
	return nil
}

// kindOf is the sentinel of a session error, ErrInvalidArgument for any other error.
func kindOf(err error) error {
	var se *tensor.Error
	if errors.As(err, &se) {
		return se.Kind
	}
	return tensor.ErrInvalidArgument
}

// epContextLoad is a context model being loaded: its EPContext node, decoded blob and the
// embedded optimized graph, which the session runs and owns.
type epContextLoad struct {
	node  string
	blob  *epcontext.Blob
	model *graph.Model
}

// readEPContext recognizes a context model: nil when m has no EPContext node. Any EPContext
// node Loom cannot run, a blob that does not decode or versions that differ from this Loom's
// are errors naming the node. modelPath is the file m was loaded from ("" for memory).
func (b *loadOptions) readEPContext(m *graph.Model, modelPath string) (*epContextLoad, error) {
	const op = "InferenceSession"
	var nodes []*graph.Node
	for _, n := range m.Graph.Nodes {
		if n.OpType == epContextOpType && n.Domain == epContextDomain {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	for _, n := range nodes {
		if src := n.AttrString("source", ""); src != epContextSource {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "EPContext node %q has source %q: Loom runs only the EPContext nodes it wrote (source %q); load the original model instead",
				n.Name, src, epContextSource)
		}
	}
	n := nodes[0]
	fail := func(kind error, format string, args ...any) (*epContextLoad, error) {
		return nil, tensor.NewError(op, kind, "EPContext node %q: %s", n.Name, fmt.Sprintf(format, args...))
	}
	if len(m.Graph.Nodes) != 1 {
		return fail(tensor.ErrInvalidArgument, "a Loom context model holds one EPContext node and no other, this graph has %d nodes", len(m.Graph.Nodes))
	}
	if b.options[OptionEPContextEnable] == "1" {
		return fail(tensor.ErrInvalidArgument, "the model is already an EP context model; load it without %s=1", OptionEPContextEnable)
	}
	if mc := n.AttrInt("main_context", 1); mc != 1 {
		return fail(tensor.ErrInvalidArgument, "main_context is %d; Loom writes (and reads) only main_context=1", mc)
	}
	if v := n.AttrString("ep_sdk_version", ""); v != loom.CompilerVersion {
		return fail(tensor.ErrInvalidArgument, "ep_sdk_version is %q but this Loom is %q; regenerate the context model with this Loom", v, loom.CompilerVersion)
	}
	attr := n.Attr("ep_cache_context")
	if attr == nil || attr.Type != graph.AttrString {
		return fail(tensor.ErrInvalidArgument, "no string attribute ep_cache_context")
	}
	var data []byte
	what := "embedded blob"
	switch mode := n.AttrInt("embed_mode", 1); mode {
	case 1:
		data = attr.String
	case 0:
		name := string(attr.String)
		what = fmt.Sprintf("blob file %q", name)
		dir := ""
		switch {
		case modelPath != "":
			dir = filepath.Dir(modelPath)
		case b.options[OptionEPContextFilePath] != "":
			dir = filepath.Dir(b.options[OptionEPContextFilePath])
		default:
			return fail(tensor.ErrInvalidArgument, "embed_mode=0 names the blob file %q relative to the context model, which was loaded from memory: set session option %s to the context model's path",
				name, OptionEPContextFilePath)
		}
		full, err := epcontext.ResolveInside(dir, name)
		if err != nil {
			return fail(tensor.ErrInvalidArgument, "ep_cache_context: %v", err)
		}
		if data, err = os.ReadFile(full); err != nil {
			return fail(tensor.ErrInvalidArgument, "cannot read the blob file: %v", err)
		}
	default:
		return fail(tensor.ErrInvalidArgument, "embed_mode is %d, want 0 or 1", mode)
	}
	blob, err := epcontext.Decode(data)
	if err != nil {
		return fail(tensor.ErrInvalidArgument, "the %s is not a valid Loom context blob: %v", what, err)
	}
	if v := blob.Meta.CompilerVersion; v != loom.CompilerVersion {
		return fail(tensor.ErrInvalidArgument, "the blob was compiled by Loom %q but this Loom is %q; regenerate the context model with this Loom", v, loom.CompilerVersion)
	}
	if p := blob.Meta.PartitionName; p != n.AttrString("partition_name", p) {
		return fail(tensor.ErrInvalidArgument, "partition_name is %q but the blob is for %q", n.AttrString("partition_name", ""), p)
	}
	for _, k := range blob.Kernels {
		src, err := kernels.Source(k.File)
		if err != nil {
			return fail(tensor.ErrInvalidArgument, "kernel %s of %s: this Loom's op library has no such file", k.Symbol, k.File)
		}
		if sum := sha256.Sum256(src); hex.EncodeToString(sum[:]) != k.SourceSHA256 {
			return fail(tensor.ErrInvalidArgument, "kernel %s was compiled from %s with SHA-256 %s but this Loom's %s has SHA-256 %x; regenerate the context model with this Loom",
				k.Symbol, k.File, k.SourceSHA256, k.File, sum[:])
		}
	}
	gm, err := graph.LoadBytesWithOptions(blob.Graph, graph.LoadOptions{Name: m.Name})
	if err != nil {
		return fail(tensor.ErrInvalidArgument, "the blob's graph does not load: %v", err)
	}
	// The graph was optimized when the context was written; optimization level "disabled" only
	// infers the shapes the session's metadata and runs rely on.
	if err := gm.Check(); err != nil {
		gm.Close()
		return fail(tensor.ErrInvalidArgument, "the blob's graph does not check: %v", err)
	}
	if err := opt.Optimize(gm, opt.LevelDisabled); err != nil {
		gm.Close()
		return fail(tensor.ErrInvalidArgument, "the blob's graph: shape inference failed: %v", err)
	}
	if err := epcontext.SameInterface(m.Graph, gm.Graph); err != nil {
		gm.Close()
		return fail(tensor.ErrInvalidArgument, "%v", err)
	}
	return &epContextLoad{node: n.Name, blob: blob, model: gm}, nil
}

// requestedProvider is the provider a context model's session asks for: auto means the backend
// the context was compiled for.
func (l *epContextLoad) requestedProvider(p ExecutionProvider) ExecutionProvider {
	if p == ProviderAuto {
		return ExecutionProvider(l.blob.Meta.Backend)
	}
	return p
}

// installEPContext loads the context's kernels into the session's kernel cache, compiling
// nothing, after checking that they were compiled for the session's device.
func (s *InferenceSession) installEPContext(l *epContextLoad) error {
	const op = "InferenceSession"
	meta := l.blob.Meta
	if t := s.dev.Target(); t != meta.Target {
		return tensor.NewError(op, tensor.ErrTargetMismatch, "EPContext node %q: the context was compiled for target %s (%s) but this session's %s device needs %s; regenerate the context model on this machine",
			l.node, meta.Target, meta.Backend, s.eng.Provider, t)
	}
	// Host shared objects are written to a private directory for dlopen, which maps them with
	// RTLD_NOW: the files can go as soon as every module is loaded.
	var dir string
	if s.dev.Backend() == native.BackendHost && len(l.blob.Kernels) > 0 {
		var err error
		if dir, err = os.MkdirTemp("", "loom-epcontext-"); err != nil {
			return tensor.WrapError(op, tensor.ErrDevice, err, "EPContext node %q: cannot make a directory for the kernels", l.node)
		}
		defer os.RemoveAll(dir)
	}
	c := &s.eng.Kernels
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if c.Kernels == nil {
		c.Kernels = map[string]*device.LoadedKernel{}
	}
	if c.ModuleByKey == nil {
		c.ModuleByKey = map[string]*native.Module{}
	}
	for _, k := range l.blob.Kernels {
		a := *k.Artifact
		name := fmt.Sprintf("kernel %s of %s", k.Symbol, k.File)
		if s.dev.Backend() == native.BackendCUDA {
			a.Source = string(k.Image)
		} else if c.ModuleByKey[a.Key] == nil {
			a.SharedObject = filepath.Join(dir, a.Key+".so")
			if err := os.WriteFile(a.SharedObject, k.Image, 0o700); err != nil {
				return tensor.WrapError(op, tensor.ErrDevice, err, "EPContext node %q: %s", l.node, name)
			}
		}
		sig, err := device.SignatureOf(&a, s.dev.Props())
		if err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "EPContext node %q: %s", l.node, name)
		}
		if sig, err = device.NormalizeSignature(sig, op); err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "EPContext node %q: %s", l.node, name)
		}
		m := c.ModuleByKey[a.Key]
		if m == nil {
			if m, err = device.LoadArtifact(op, s.dev, nil, &a); err != nil {
				return tensor.WrapError(op, kindOf(err), err, "EPContext node %q: %s", l.node, name)
			}
			c.ModuleByKey[a.Key] = m
			c.Modules = append(c.Modules, m) // owned by the cache from here, closed with the session
		}
		kernel, err := m.Kernel(a.Entry)
		if err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "EPContext node %q: %s: the module has no kernel %s", l.node, name, a.Entry)
		}
		c.Kernels[ops.KernelKey(k.File, k.Symbol, k.Config)] = &device.LoadedKernel{Kernel: kernel, Sig: sig}
	}
	return nil
}
