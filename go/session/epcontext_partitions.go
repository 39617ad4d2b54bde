package session

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"strings"

	"github.com/loomrt/loom/go/graph"
	"github.com/loomrt/loom/go/loom"
	"github.com/loomrt/loom/go/session/internal/epcontext"
	"github.com/loomrt/loom/go/session/internal/tensor"
)

// EP context partitions (docs/epcontext.md, "Partitions"). A session built with
// ep.context_enable=1 splits its optimized graph into one partition per execution provider
// its nodes are placed on (a host and a cuda partition when a cuda session has host
// fallbacks) and writes each as a com.microsoft EPContext node whose payload holds the
// partition's graph fragment and the kernels its provider compiled.
//
// Why one partition per provider and not one per contiguous placement group: the kernels are
// a cache of the provider's device, not of a node (one kernel serves every node of its
// specialization, and a compiled run plan's segments run kernels of many nodes), so a
// provider's kernels have one home and are restored once, by the provider that compiled
// them; groups would store a shared kernel in each group or need a node-by-node record of
// which node asked for which kernel that the cache does not keep.

// EpContextConfig is the session's ep.context_* options (OptionEPContextEnable,
// OptionEPContextFilePath, OptionEPContextEmbedMode) as typed values, defaults filled in.
// WithOption refuses a malformed value when the session is built.
type EpContextConfig struct {
	// Enable is ep.context_enable=1: the session writes its context model once built.
	Enable bool
	// FilePath is ep.context_file_path: where the context model goes ("" when not set and
	// the session writes none; a writing session loaded from a file fills in
	// <model>_ctx.onnx).
	FilePath string
	// EmbedMode is ep.context_embed_mode: 1 (the default), the payloads are the nodes'
	// ep_cache_context attributes; 0, each is a file beside the context model.
	EmbedMode int
}

// EpContextConfig returns the session's ep.context_* options.
func (s *InferenceSession) EpContextConfig() EpContextConfig {
	c := EpContextConfig{Enable: s.options[OptionEPContextEnable] == "1", FilePath: s.options[OptionEPContextFilePath], EmbedMode: 1}
	if s.options[OptionEPContextEmbedMode] == "0" {
		c.EmbedMode = 0
	}
	return c
}

// CompiledPartition is the part of a session's graph one execution provider compiled, as an
// EP context model stores it in one EPContext node.
type CompiledPartition struct {
	// Name is the partition's name: the EPContext node's name and partition_name
	// (loom_<graph> for a session of one partition, loom_<graph>_<provider> otherwise).
	Name string
	// Provider is the execution provider that compiled the partition and restores it.
	Provider ExecutionProvider
	// Target is the device code target of the payload's kernels (hardware_architecture).
	Target string
	// Nodes are the ids of the nodes of Graph() the partition covers, in graph order: a
	// node's name when no other node has it, else "<output Y>" after its first named output.
	Nodes []string
	// Payload is what the provider's save step made: a context blob (docs/epcontext.md)
	// holding the partition's graph fragment and its compiled kernels.
	Payload []byte
	// SourceKey is the hex SHA-256 binding Payload to Provider and Target: a payload changed,
	// or given to another provider or target, no longer matches it.
	SourceKey string
}

// partitionName names a session's partition of provider p among count partitions.
func partitionName(g *graph.Graph, p ExecutionProvider, count int) string {
	name := g.Name
	if name == "" {
		name = "graph"
	}
	if count == 1 {
		return "loom_" + name
	}
	return "loom_" + name + "_" + string(p)
}

// Partitions returns the session's partitions, one per execution provider its nodes are
// placed on, in the order of each provider's first node: each covers the nodes placed on its
// provider, and its payload holds their graph fragment and, for the provider the session
// runs on, the kernels the session compiled while it warmed up for its context model (the
// host partition of a cuda session has none: its nodes run as Go host functions). Only a
// session built with ep.context_enable=1 records its kernels, so for any other Partitions is
// an error, as it is for a closed session.
func (s *InferenceSession) Partitions() ([]CompiledPartition, error) {
	const op = "Partitions"
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	if s.epKernels == nil {
		return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "the session records the kernels of its partitions only when built with session option %s=1", OptionEPContextEnable)
	}
	g := s.eng.Model.Graph
	runsOn := s.eng.Provider
	kernels := *s.epKernels
	var order []ExecutionProvider
	index := map[ExecutionProvider]int{}
	owner := make([]int, len(g.Nodes))
	add := func(p ExecutionProvider) int {
		i, ok := index[p]
		if !ok {
			i = len(order)
			index[p] = i
			order = append(order, p)
		}
		return i
	}
	for i, n := range g.Nodes {
		owner[i] = add(s.eng.Placements.Of(n).Provider)
	}
	if len(order) == 0 || len(kernels) > 0 {
		add(runsOn)
	}
	ids := epcontext.NodeIDs(g)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return nil, tensor.NewError(op, tensor.ErrInvalidArgument, "two nodes of the graph have the id %q (the name no other node has, else the first output): the partitions cannot name their nodes", id)
		}
		seen[id] = true
	}
	frags, _, err := epcontext.Split(s.modelWithWeights(), owner, len(order))
	if err != nil {
		return nil, tensor.WrapError(op, tensor.ErrInternal, err, "splitting the graph into partitions")
	}
	out := make([]CompiledPartition, len(order))
	for p, prov := range order {
		part := CompiledPartition{Name: partitionName(g, prov, len(order)), Provider: prov, Nodes: []string{}}
		var ks []epcontext.Kernel
		if prov == runsOn {
			part.Target, ks = s.dev.Target(), kernels
		} else {
			// Only the host runs nodes beside the session's provider, as Go host functions.
			part.Target = loom.HostTarget().String()
		}
		for i, id := range ids {
			if owner[i] == p {
				part.Nodes = append(part.Nodes, id)
			}
		}
		fragment, err := frags[p].Marshal()
		if err != nil {
			return nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "partition %q: serializing its graph", part.Name)
		}
		if part.Payload, err = epcontext.Encode(&epcontext.Blob{
			Meta: epcontext.Meta{CompilerVersion: loom.CompilerVersion, Target: part.Target, Backend: string(prov),
				PartitionName: part.Name, SourceModel: s.eng.Model.Name},
			Graph:   fragment,
			Kernels: ks,
		}); err != nil {
			return nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "partition %q: encoding its payload", part.Name)
		}
		part.SourceKey = epcontext.SourceKey(string(prov), part.Target, part.Payload)
		out[p] = part
	}
	return out, nil
}

// ExportEpContext writes the context model of partitions (the session's, from Partitions)
// and returns its path: ep.context_file_path, or origPath (the source model's file) with
// ".onnx" replaced by "_ctx.onnx". Each partition becomes one com.microsoft EPContext node
// naming its provider, covered nodes and source key; its payload is the node's
// ep_cache_context (embed mode 1) or a file beside the context model (embed mode 0,
// <context model>_loom.bin for one partition, <context model>_<partition>.bin for several).
// The context model's graph has the session's inputs and outputs; each node's inputs are
// the values it reads from the graph inputs and earlier partitions, its outputs those that
// graph outputs and later partitions read.
//
// With ep.context_enable=0 (the default) it writes nothing and returns the path it would have
// written. Otherwise the partitions must cover every node of Graph() once, name only its nodes
// and providers host or cuda, and each payload must match its source key, name, provider and
// target: what is written is read back as a loading session would (the fragments must join
// into the session's graph) before any file is written. Errors name the partition at fault.
func (s *InferenceSession) ExportEpContext(origPath string, partitions []CompiledPartition) (string, error) {
	const op = "ExportEpContext"
	cfg := s.EpContextConfig()
	path := cfg.FilePath
	if path == "" {
		if origPath == "" {
			return "", tensor.NewError(op, tensor.ErrInvalidArgument, "no path for the context model: session option %s is not set and there is no source model path to derive it from", OptionEPContextFilePath)
		}
		path = defaultEPContextPath(origPath)
	}
	if !cfg.Enable {
		return path, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return "", tensor.NewError(op, tensor.ErrClosed, "the session is closed")
	}
	if origPath != "" && epcontext.SameFile(origPath, path) {
		return "", tensor.NewError(op, tensor.ErrInvalidArgument, "session option %s %q is the source model itself; the context model would overwrite it", OptionEPContextFilePath, path)
	}
	cm, files, err := s.epContextModel(path, cfg.EmbedMode, partitions)
	if err != nil {
		return "", err
	}
	data, err := cm.Marshal()
	if err != nil {
		return "", tensor.WrapError(op, tensor.ErrInvalidArgument, err, "serializing the EP context model")
	}
	// The blobs first: a context model on disk always finds the blobs it names.
	for _, f := range files {
		if err := epcontext.WriteFileAtomic(f.path, f.data); err != nil {
			return "", tensor.WrapError(op, tensor.ErrInvalidArgument, err, "cannot write the EP context blob of partition %q", f.partition)
		}
	}
	if err := epcontext.WriteFileAtomic(path, data); err != nil {
		return "", tensor.WrapError(op, tensor.ErrInvalidArgument, err, "cannot write the EP context model (session option %s)", OptionEPContextFilePath)
	}
	return path, nil
}

// epContextFile is a blob file of an embed-mode-0 context model.
type epContextFile struct {
	partition, path string
	data            []byte
}

// epContextModel builds the context model at path of partitions (and, for embed mode 0, the
// blob files it names), checked by reading it back as a loading session would.
func (s *InferenceSession) epContextModel(path string, embedMode int, parts []CompiledPartition) (*graph.Model, []epContextFile, error) {
	const op = "ExportEpContext"
	g := s.eng.Model.Graph
	if len(parts) == 0 {
		return nil, nil, tensor.NewError(op, tensor.ErrInvalidArgument, "no partitions to write")
	}
	ids := epcontext.NodeIDs(g)
	at := make(map[string]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	owner := make([]int, len(g.Nodes))
	for i := range owner {
		owner[i] = -1
	}
	names := map[string]int{}
	blobs := make([]*epcontext.Blob, len(parts))
	for p, part := range parts {
		fail := func(kind error, format string, args ...any) (*graph.Model, []epContextFile, error) {
			return nil, nil, tensor.NewError(op, kind, "partition %d (%q): %s", p, part.Name, fmt.Sprintf(format, args...))
		}
		switch {
		case part.Name == "" || strings.ContainsRune(part.Name, 0):
			return fail(tensor.ErrInvalidArgument, "a partition needs a name")
		case part.Provider != ProviderHost && part.Provider != ProviderCUDA:
			return fail(tensor.ErrInvalidArgument, "unknown execution provider %q (Loom's are host and cuda)", part.Provider)
		case part.Target == "":
			return fail(tensor.ErrInvalidArgument, "no target")
		}
		if q, dup := names[part.Name]; dup {
			return fail(tensor.ErrInvalidArgument, "partition %d has the same name", q)
		}
		names[part.Name] = p
		for _, id := range part.Nodes {
			i, ok := at[id]
			if !ok {
				return fail(tensor.ErrInvalidArgument, "covered node %q is not a node of the session's graph (see Graph: a node's id is its name, else <output Y>)", id)
			}
			if q := owner[i]; q >= 0 {
				return fail(tensor.ErrInvalidArgument, "node %q is covered by partition %q too", id, parts[q].Name)
			}
			owner[i] = p
		}
		if key := epcontext.SourceKey(string(part.Provider), part.Target, part.Payload); key != part.SourceKey {
			return fail(tensor.ErrInvalidArgument, "the payload does not match the source key: it was changed, or made for another provider or target than %s, %s (source key %q, the payload's %q)",
				part.Provider, part.Target, part.SourceKey, key)
		}
		b, err := epcontext.Decode(part.Payload)
		if err != nil {
			return fail(tensor.ErrInvalidArgument, "the payload is not a valid Loom context blob: %v", err)
		}
		switch {
		case ExecutionProvider(b.Meta.Backend) != part.Provider:
			return fail(tensor.ErrInvalidArgument, "the payload was compiled by the %s provider, not %s", b.Meta.Backend, part.Provider)
		case b.Meta.Target != part.Target:
			return fail(tensor.ErrTargetMismatch, "the payload is for target %s, not %s", b.Meta.Target, part.Target)
		case b.Meta.PartitionName != part.Name:
			return fail(tensor.ErrInvalidArgument, "the payload is for partition %q", b.Meta.PartitionName)
		}
		blobs[p] = b
	}
	for i, p := range owner {
		if p < 0 {
			return nil, nil, tensor.NewError(op, tensor.ErrInvalidArgument, "node %q (%s) is in no partition", ids[i], g.Nodes[i].OpType)
		}
	}
	_, wiring, err := epcontext.Split(s.eng.Model, owner, len(parts))
	if err != nil {
		return nil, nil, tensor.WrapError(op, tensor.ErrInternal, err, "wiring the partitions")
	}
	cg := &graph.Graph{Name: g.Name, Doc: g.Doc}
	for _, v := range g.Inputs {
		if v.Initializer != nil || g.Initializers[v.Name] != nil {
			continue // an overridable initializer stays in a payload's graph, not a required input
		}
		in := graph.Input(v.Name, v.Declared)
		in.Doc = v.Doc
		cg.Inputs = append(cg.Inputs, in)
	}
	for _, v := range g.Outputs {
		o := graph.Output(v.Name, v.Declared)
		o.Doc = v.Doc
		cg.Outputs = append(cg.Outputs, o)
	}
	base := strings.TrimSuffix(filepath.Base(path), ".onnx")
	var files []epContextFile
	payloads := map[string][]byte{}
	fileNames := map[string]string{}
	for p, part := range parts {
		notes, err := json.Marshal(epContextNotes{LoomTarget: part.Target, LoomBackend: string(part.Provider),
			BlobFormat: fmt.Sprintf("%s/%d", epcontext.FormatName, epcontext.FormatVersion), Kernels: len(blobs[p].Kernels),
			Provider: string(part.Provider), Nodes: append([]string{}, part.Nodes...), SourceKey: part.SourceKey})
		if err != nil {
			return nil, nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "encoding the EPContext notes")
		}
		cache := &graph.Attribute{Name: "ep_cache_context", Type: graph.AttrString, String: part.Payload}
		if embedMode == 0 {
			name := base + epContextBlobSuffix
			if len(parts) > 1 {
				name = base + "_" + fileSafe(part.Name) + ".bin"
			}
			if q, dup := fileNames[name]; dup {
				return nil, nil, tensor.NewError(op, tensor.ErrInvalidArgument, "partitions %q and %q would write the same blob file %q", q, part.Name, name)
			}
			fileNames[name] = part.Name
			cache.String = []byte(name) // relative to the context model's directory
			files = append(files, epContextFile{partition: part.Name, path: filepath.Join(filepath.Dir(path), name), data: part.Payload})
		}
		payloads[part.Name] = part.Payload
		embed := int64(embedMode)
		node := graph.NewNode(part.Name, epContextOpType, wiring[p].Inputs, wiring[p].Outputs,
			graph.IntAttr("main_context", 1),
			cache,
			graph.IntAttr("embed_mode", embed),
			graph.StringAttr("source", epContextSource),
			graph.StringAttr("ep_sdk_version", loom.CompilerVersion),
			graph.StringAttr("partition_name", part.Name),
			graph.StringAttr("hardware_architecture", part.Target),
			graph.StringAttr("notes", string(notes)),
		)
		node.Domain = epContextDomain
		cg.Nodes = append(cg.Nodes, node)
	}
	src := s.eng.Model
	cm := &graph.Model{
		Name: filepath.Base(path), IRVersion: max(src.IRVersion, 7), ProducerName: src.ProducerName,
		ProducerVersion: src.ProducerVersion, Domain: src.Domain, ModelVersion: src.ModelVersion, Doc: src.Doc,
		MetadataProps: maps.Clone(src.MetadataProps), Opsets: map[string]int64{}, Graph: cg,
	}
	for d, v := range src.Opsets {
		if d != graph.LoomDomain { // the fused operators live only inside the payloads' graphs
			cm.Opsets[d] = v
		}
	}
	cm.Opsets[epContextDomain] = 1
	// Read it back as a loading session would, from the bytes about to be written.
	data, err := cm.Marshal()
	if err != nil {
		return nil, nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "serializing the EP context model")
	}
	back, err := graph.LoadBytesWithOptions(data, graph.LoadOptions{Name: cm.Name})
	if err != nil {
		return nil, nil, tensor.WrapError(op, tensor.ErrInvalidArgument, err, "the EP context model does not load back")
	}
	l, err := readEPContextParts(back, back.Graph.Nodes, func(n *graph.Node) (string, []byte, error) {
		return "payload", payloads[n.Name], nil
	})
	if err != nil {
		return nil, nil, tensor.WrapError(op, kindOf(err), err, "the EP context model does not read back")
	}
	l.model.Close()
	return cm, files, nil
}

// fileSafe is name with every byte outside [A-Za-z0-9._-] replaced by '_', for a file name.
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
}

// modelWithWeights is the session's model with every initializer's bytes, for marshaling: a
// shallow copy whose initializers the session holds packed (and dropped the bytes of, see
// relayWeights) are unpacked copies. The session's model is not changed, so concurrent calls
// and Graph need no lock beyond the session's.
func (s *InferenceSession) modelWithWeights() *graph.Model {
	src := s.eng.Model
	g := src.Graph
	var inits map[string]*graph.Tensor
	for _, name := range s.relaid {
		gt, w := g.Initializers[name], s.eng.Weights[name]
		if gt == nil || gt.Raw != nil {
			continue
		}
		v, ok := w.Data().([]float32)
		if !ok {
			continue
		}
		if inits == nil {
			inits = maps.Clone(g.Initializers)
		}
		c := *gt
		c.Raw = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(c.Raw[4*i:], math.Float32bits(x))
		}
		inits[name] = &c
	}
	if inits == nil {
		return src
	}
	cg := *g
	cg.Initializers = inits
	m := &graph.Model{Name: src.Name, IRVersion: src.IRVersion, ProducerName: src.ProducerName,
		ProducerVersion: src.ProducerVersion, Domain: src.Domain, ModelVersion: src.ModelVersion, Doc: src.Doc,
		MetadataProps: src.MetadataProps, Opsets: src.Opsets, Graph: &cg}
	return m
}
