package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/graph/opt"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/native"
	"github.com/loomrt/loom/go/session/internal/device"
	"github.com/loomrt/loom/go/session/internal/ep"
	"github.com/loomrt/loom/go/session/internal/epcontext"
	"github.com/loomrt/loom/go/session/internal/exec"
	"github.com/loomrt/loom/go/session/internal/ops"
	"github.com/loomrt/loom/go/session/internal/tensor"
	"github.com/loomrt/loom/kernels"
)

// EP context models (docs/epcontext.md). With ep.context_enable=1 a session, once built, warms
// up and writes a context model: an ONNX model whose graph holds one com.microsoft EPContext
// node of source "loom" per partition (one per execution provider its nodes are placed on,
// epcontext_partitions.go), whose payload (a context blob, internal/epcontext) holds the
// partition's graph fragment and the kernels its provider compiled. Loading such a model skips
// optimization and compilation: each node is restored by the provider it names, the fragments
// join into the optimized graph, and the kernels go straight into the session's cache. A
// context model of one node whose notes name no partition (written before partitions, its blob
// holding the whole graph) still loads.

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

// keptKernels returns the recorded kernels with their module images (the provider's save
// step: host shared objects are read back from the Loom cache and checked against their
// digest, CUDA kernels keep their source), sorted by cache key.
func keptKernels(c *exec.KernelCache, p ep.Provider) ([]epcontext.Kernel, error) {
	kept := c.KeptList()
	out := make([]epcontext.Kernel, 0, len(kept))
	for _, k := range kept {
		src, err := kernels.Source(k.File)
		if err != nil {
			return nil, fmt.Errorf("kernel %s of %s: %w", k.Symbol, k.File, err)
		}
		sum := sha256.Sum256(src)
		a := *k.Artifact
		image, err := p.SaveKernel(&a)
		if err != nil {
			return nil, fmt.Errorf("kernel %s of %s: %w", k.Symbol, k.File, err)
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

// runsOnProvider is the provider the session runs on (see ep.Select): the host's, the CUDA
// stand-in's (a cuda session on a host device) or CUDA's.
func (s *InferenceSession) runsOnProvider() ep.Provider {
	switch {
	case s.eng.Provider != ep.CUDA:
		return ep.HostProvider{}
	case s.dev.Backend() == native.BackendHost:
		return ep.CUDAStandIn{}
	}
	return ep.CUDAProvider{}
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

// epContextNotes is the JSON of an EPContext node's notes attribute.
type epContextNotes = epcontext.Notes

// writeEPContext warms the session up with its declared input shapes, so that the kernels a run
// needs are compiled and recorded, then writes the context model of the session's partitions
// to ep.context_file_path (and, for embed mode 0, their blobs beside it). modelPath is the
// source model's file ("" for one from memory).
func (s *InferenceSession) writeEPContext(modelPath string) error {
	const op = "InferenceSession"
	path := s.options[OptionEPContextFilePath]
	if modelPath != "" && epcontext.SameFile(modelPath, path) {
		return tensor.NewError(op, tensor.ErrInvalidArgument, "session option %s %q is the source model itself; the context model would overwrite it", OptionEPContextFilePath, path)
	}
	shapes, err := s.epContextWarmupShapes()
	if err != nil {
		return err
	}
	s.eng.Kernels.StartKeeping()
	defer s.eng.Kernels.StopKeeping()
	// The first run of a signature is interpreted (and traced into a compiled run plan); the
	// second runs the plan, whose kernels may differ (weights packed for the matrix products,
	// fused epilogues): both are recorded.
	runs := 1
	if s.planning {
		runs = 2
	}
	for range runs {
		if err := s.Warmup(context.Background(), shapes); err != nil {
			return tensor.WrapError(op, kindOf(err), err, "warming the session up for the EP context model (symbolic input dimensions set to 1)")
		}
	}
	kernels, err := keptKernels(&s.eng.Kernels, s.runsOnProvider())
	if err != nil {
		return tensor.WrapError(op, tensor.ErrCompile, err, "collecting the kernels of the EP context model")
	}
	s.epKernels = &kernels
	parts, err := s.Partitions()
	if err != nil {
		return err
	}
	if s.epContextPath, err = s.ExportEpContext(modelPath, parts); err != nil {
		return err
	}
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

// epContextPart is one EPContext node of a context model being loaded: the provider that
// compiled it, the target its kernels run on, its decoded blob and the graph fragment in it.
type epContextPart struct {
	node     string
	provider ExecutionProvider
	target   string
	notes    epcontext.Notes
	blob     *epcontext.Blob
	fragment *graph.Model
}

// epContextLoad is a context model being loaded: its partitions and the optimized graph they
// join into, which the session runs and owns.
type epContextLoad struct {
	parts []*epContextPart
	model *graph.Model
}

// epContextPayload reads an EPContext node's payload: what it is (for messages) and its bytes.
type epContextPayload func(n *graph.Node) (what string, data []byte, err error)

// payloadFrom reads a node's payload from its ep_cache_context attribute (embed mode 1) or from
// the file it names (embed mode 0), resolved in the context model's directory: modelPath's
// (the file the context model was loaded from) or ep.context_file_path's.
func (b *loadOptions) payloadFrom(modelPath string) epContextPayload {
	return func(n *graph.Node) (string, []byte, error) {
		attr := n.Attr("ep_cache_context")
		if attr == nil || attr.Type != graph.AttrString {
			return "", nil, errors.New("no string attribute ep_cache_context")
		}
		switch mode := n.AttrInt("embed_mode", 1); mode {
		case 1:
			return "embedded blob", attr.String, nil
		case 0:
			name := string(attr.String)
			what := fmt.Sprintf("blob file %q", name)
			dir := ""
			switch {
			case modelPath != "":
				dir = filepath.Dir(modelPath)
			case b.options[OptionEPContextFilePath] != "":
				dir = filepath.Dir(b.options[OptionEPContextFilePath])
			default:
				return "", nil, fmt.Errorf("embed_mode=0 names the blob file %q relative to the context model, which was loaded from memory: set session option %s to the context model's path",
					name, OptionEPContextFilePath)
			}
			full, err := epcontext.ResolveInside(dir, name)
			if err != nil {
				return "", nil, fmt.Errorf("ep_cache_context: %v", err)
			}
			data, err := os.ReadFile(full)
			if err != nil {
				return "", nil, fmt.Errorf("cannot read the blob file: %v", err)
			}
			return what, data, nil
		default:
			return "", nil, fmt.Errorf("embed_mode is %d, want 0 or 1", mode)
		}
	}
}

// readEPContext recognizes a context model: nil when m has no EPContext node. Any EPContext
// node Loom cannot run, a payload that does not decode or does not match its node, versions
// that differ from this Loom's, or partitions that do not join into one graph are errors
// naming the node. modelPath is the file m was loaded from ("" for memory).
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
	fail := func(n *graph.Node, kind error, format string, args ...any) (*epContextLoad, error) {
		return nil, tensor.NewError(op, kind, "EPContext node %q: %s", n.Name, fmt.Sprintf(format, args...))
	}
	if len(m.Graph.Nodes) != len(nodes) {
		if len(nodes) == 1 {
			return fail(nodes[0], tensor.ErrInvalidArgument, "a Loom context model holds one EPContext node and no other, this graph has %d nodes", len(m.Graph.Nodes))
		}
		for _, n := range m.Graph.Nodes {
			if n.OpType != epContextOpType || n.Domain != epContextDomain {
				return fail(nodes[0], tensor.ErrInvalidArgument, "a Loom context model holds EPContext nodes and no other, this graph also has node %q (%s)", n.Label(), n.OpType)
			}
		}
	}
	if b.options[OptionEPContextEnable] == "1" {
		return fail(nodes[0], tensor.ErrInvalidArgument, "the model is already an EP context model; load it without %s=1", OptionEPContextEnable)
	}
	return readEPContextParts(m, nodes, b.payloadFrom(modelPath))
}

// readEPContextParts reads, checks and joins the partitions of a context model (the loader's
// path and ExportEpContext's check of what it is about to write).
func readEPContextParts(m *graph.Model, nodes []*graph.Node, payload epContextPayload) (*epContextLoad, error) {
	const op = "InferenceSession"
	l := &epContextLoad{}
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.Name] {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "EPContext node %q appears twice", n.Name)
		}
		seen[n.Name] = true
		part, err := readEPContextPart(m, n, len(nodes), payload)
		if err != nil {
			return nil, err
		}
		l.parts = append(l.parts, part)
	}
	first := nodes[0].Name
	fail := func(node string, kind error, format string, args ...any) (*epContextLoad, error) {
		if l.model != nil {
			l.model.Close()
		}
		return nil, tensor.NewError(op, kind, "EPContext node %q: %s", node, fmt.Sprintf(format, args...))
	}
	jp := make([]epcontext.Part, len(l.parts))
	for i, p := range l.parts {
		jp[i] = epcontext.Part{Node: p.node, Fragment: p.fragment, Nodes: p.notes.Nodes}
		if p.notes.Legacy() {
			jp[i].Nodes = nil // the whole graph
		} else if p.notes.Nodes == nil {
			jp[i].Nodes = []string{}
		}
	}
	gm, err := epcontext.Join(m.Name, m.Graph, jp)
	if err != nil {
		var ne *epcontext.NodeError
		if errors.As(err, &ne) {
			return fail(ne.Node, tensor.ErrInvalidArgument, "%v", ne.Err)
		}
		return fail(first, tensor.ErrInvalidArgument, "%v", err)
	}
	l.model = gm
	// The graph was optimized when the context was written; optimization level "disabled" only
	// infers the shapes the session's metadata and runs rely on.
	if err := gm.Check(); err != nil {
		return fail(first, tensor.ErrInvalidArgument, "the blob's graph does not check: %v", err)
	}
	if err := opt.Optimize(gm, opt.LevelDisabled); err != nil {
		return fail(first, tensor.ErrInvalidArgument, "the blob's graph: shape inference failed: %v", err)
	}
	if err := epcontext.SameInterface(m.Graph, gm.Graph); err != nil {
		return fail(first, tensor.ErrInvalidArgument, "%v", err)
	}
	return l, nil
}

// readEPContextPart reads and checks one EPContext node of a context model of count nodes.
func readEPContextPart(m *graph.Model, n *graph.Node, count int, payload epContextPayload) (*epContextPart, error) {
	const op = "InferenceSession"
	fail := func(kind error, format string, args ...any) (*epContextPart, error) {
		return nil, tensor.NewError(op, kind, "EPContext node %q: %s", n.Name, fmt.Sprintf(format, args...))
	}
	if mc := n.AttrInt("main_context", 1); mc != 1 {
		return fail(tensor.ErrInvalidArgument, "main_context is %d; Loom writes (and reads) only main_context=1", mc)
	}
	if v := n.AttrString("ep_sdk_version", ""); v != loom.CompilerVersion {
		return fail(tensor.ErrInvalidArgument, "ep_sdk_version is %q but this Loom is %q; regenerate the context model with this Loom", v, loom.CompilerVersion)
	}
	p := &epContextPart{node: n.Name}
	if raw := n.AttrString("notes", ""); raw != "" {
		if err := json.Unmarshal([]byte(raw), &p.notes); err != nil {
			return fail(tensor.ErrInvalidArgument, "notes are not the JSON Loom writes: %v", err)
		}
	}
	legacy := p.notes.Legacy()
	if legacy && count > 1 {
		return fail(tensor.ErrInvalidArgument, "its notes name no partition (provider, nodes, source_key), which only a context model of one EPContext node may omit")
	}
	if !legacy {
		p.provider, p.target = ExecutionProvider(p.notes.Provider), n.AttrString("hardware_architecture", "")
		if p.provider != ProviderHost && p.provider != ProviderCUDA {
			return fail(tensor.ErrInvalidArgument, "unknown execution provider %q (Loom's are host and cuda)", p.notes.Provider)
		}
	}
	what, data, err := payload(n)
	if err != nil {
		return fail(tensor.ErrInvalidArgument, "%v", err)
	}
	blob, err := epcontext.Decode(data)
	if err != nil {
		return fail(tensor.ErrInvalidArgument, "the %s is not a valid Loom context blob: %v", what, err)
	}
	p.blob = blob
	if !legacy {
		if key := epcontext.SourceKey(string(p.provider), p.target, data); key != p.notes.SourceKey {
			return fail(tensor.ErrInvalidArgument, "the %s does not match the node's source key: it was changed, or it was written for another provider or target than the node's (%s, %s); source key %q, the payload's %q",
				what, p.provider, p.target, p.notes.SourceKey, key)
		}
	}
	if v := blob.Meta.CompilerVersion; v != loom.CompilerVersion {
		return fail(tensor.ErrInvalidArgument, "the blob was compiled by Loom %q but this Loom is %q; regenerate the context model with this Loom", v, loom.CompilerVersion)
	}
	if name := blob.Meta.PartitionName; name != n.AttrString("partition_name", name) {
		return fail(tensor.ErrInvalidArgument, "partition_name is %q but the blob is for %q", n.AttrString("partition_name", ""), name)
	}
	if legacy {
		p.provider, p.target = ExecutionProvider(blob.Meta.Backend), blob.Meta.Target
	} else {
		if b := ExecutionProvider(blob.Meta.Backend); b != p.provider {
			return fail(tensor.ErrInvalidArgument, "the payload was compiled by the %s provider but the node names the %s provider", b, p.provider)
		}
		if blob.Meta.Target != p.target {
			return fail(tensor.ErrTargetMismatch, "the payload is for target %s but the node's hardware_architecture is %s", blob.Meta.Target, p.target)
		}
		if len(blob.Kernels) != p.notes.Kernels {
			return fail(tensor.ErrInvalidArgument, "the payload has %d kernels, the notes say %d", len(blob.Kernels), p.notes.Kernels)
		}
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
	if p.fragment, err = graph.LoadBytesWithOptions(blob.Graph, graph.LoadOptions{Name: m.Name}); err != nil {
		return fail(tensor.ErrInvalidArgument, "the blob's graph does not load: %v", err)
	}
	return p, nil
}

// requestedProvider is the provider a context model's session asks for: auto means cuda when
// a partition was compiled by the cuda provider, else the host.
func (l *epContextLoad) requestedProvider(p ExecutionProvider) ExecutionProvider {
	if p != ProviderAuto {
		return p
	}
	for _, part := range l.parts {
		if part.provider == ProviderCUDA {
			return ProviderCUDA
		}
	}
	return ProviderHost
}

// installEPContext restores every partition with the provider it names: the session's
// provider loads the partition's kernels into the session's kernel cache, compiling nothing,
// after checking that they were compiled for the session's device. A partition of another
// provider is refused, except a host partition without kernels (its nodes run as Go host
// functions, on any provider).
func (s *InferenceSession) installEPContext(l *epContextLoad) error {
	const op = "InferenceSession"
	runsOn := s.runsOnProvider()
	for _, p := range l.parts {
		if p.provider != runsOn.Name() {
			if p.provider == ProviderHost && len(p.blob.Kernels) == 0 {
				continue
			}
			why := ""
			if p.provider == ProviderCUDA {
				if u := ep.NewCUDA().Available(); u != "" {
					why = " (" + u + ")"
				}
			}
			return tensor.NewError(op, tensor.ErrTargetMismatch, "EPContext node %q: the context was compiled for target %s by the %s provider, which this session does not run on: it runs on %s%s; load it with WithExecutionProvider(%q) where that provider is available",
				p.node, p.target, p.provider, s.eng.Provider, why, p.provider)
		}
		if err := s.installPartition(runsOn, p); err != nil {
			return err
		}
	}
	return nil
}

// installPartition restores one partition's kernels with runsOn's restore step.
func (s *InferenceSession) installPartition(runsOn ep.Provider, p *epContextPart) error {
	const op = "InferenceSession"
	meta := p.blob.Meta
	if t := s.dev.Target(); t != meta.Target {
		return tensor.NewError(op, tensor.ErrTargetMismatch, "EPContext node %q: the context was compiled for target %s (%s) but this session's %s device needs %s; regenerate the context model on this machine",
			p.node, meta.Target, meta.Backend, s.eng.Provider, t)
	}
	// Host shared objects are written to a private directory for dlopen, which maps them with
	// RTLD_NOW: the files can go as soon as every module is loaded.
	var dir string
	if runsOn.NeedsDir() && len(p.blob.Kernels) > 0 {
		var err error
		if dir, err = os.MkdirTemp("", "loom-epcontext-"); err != nil {
			return tensor.WrapError(op, tensor.ErrDevice, err, "EPContext node %q: cannot make a directory for the kernels", p.node)
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
	for _, k := range p.blob.Kernels {
		name := fmt.Sprintf("kernel %s of %s", k.Symbol, k.File)
		m := c.ModuleByKey[k.Artifact.Key]
		a := k.Artifact
		if m == nil {
			var err error
			if a, err = runsOn.RestoreKernel(*k.Artifact, k.Image, dir); err != nil {
				return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "EPContext node %q: %s", p.node, name)
			}
		}
		sig, err := device.SignatureOf(a, s.dev.Props())
		if err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "EPContext node %q: %s", p.node, name)
		}
		if sig, err = device.NormalizeSignature(sig, op); err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "EPContext node %q: %s", p.node, name)
		}
		if m == nil {
			if m, err = device.LoadArtifact(op, s.dev, nil, a); err != nil {
				return tensor.WrapError(op, kindOf(err), err, "EPContext node %q: %s", p.node, name)
			}
			c.ModuleByKey[a.Key] = m
			c.Modules = append(c.Modules, m) // owned by the cache from here, closed with the session
		}
		kernel, err := m.Kernel(a.Entry)
		if err != nil {
			return tensor.WrapError(op, tensor.ErrInvalidArgument, err, "EPContext node %q: %s: the module has no kernel %s", p.node, name, a.Entry)
		}
		c.Kernels[ops.KernelKey(k.File, k.Symbol, k.Config)] = &device.LoadedKernel{Kernel: kernel, Sig: sig}
	}
	return nil
}
