package serve

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/loomrt/loom/go/session"
)

// headerLength is the binary tensor data extension's header: the byte length of the JSON part
// of a body whose rest is the tensors' raw bytes.
const headerLength = "Inference-Header-Content-Length"

var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Handler returns the REST API: health, metadata, inference, the repository extension and
// /metrics. Serve serves it; an application may mount it on its own server.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, r *http.Request) {
		if !s.Ready() {
			writeError(w, errorf(kindUnavailable, "not ready"))
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /v2", s.httpServerMetadata)
	for _, prefix := range []string{"/v2/models/{name}", "/v2/models/{name}/versions/{version}"} {
		mux.HandleFunc("GET "+prefix, s.httpModelMetadata)
		mux.HandleFunc("GET "+prefix+"/ready", s.httpModelReady)
		mux.HandleFunc("GET "+prefix+"/config", s.httpModelConfig)
		mux.HandleFunc("GET "+prefix+"/stats", s.httpModelStatistics)
		mux.HandleFunc("POST "+prefix+"/infer", s.httpInfer)
	}
	mux.HandleFunc("GET /v2/models/stats", s.httpModelStatistics)
	mux.HandleFunc("POST /v2/repository/index", s.httpRepositoryIndex)
	mux.HandleFunc("POST /v2/repository/models/{name}/load", s.httpRepositoryLoad)
	mux.HandleFunc("POST /v2/repository/models/{name}/unload", s.httpRepositoryUnload)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(kindNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// writeError answers {"error": "..."} with the error's status.
func writeError(w http.ResponseWriter, err error) {
	e := asError(err)
	writeJSON(w, e.HTTPStatus(), map[string]string{"error": e.msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // the client has gone
}

func (s *Server) httpServerMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"name": s.cfg.serverName, "version": s.cfg.serverVersion, "extensions": extensions})
}

// tensorMeta is a model input's or output's metadata.
type tensorMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// modelMetadata is the protocol's model metadata object.
type modelMetadata struct {
	Name     string       `json:"name"`
	Versions []string     `json:"versions"`
	Platform string       `json:"platform"`
	Inputs   []tensorMeta `json:"inputs"`
	Outputs  []tensorMeta `json:"outputs"`
}

// Platform is the platform name model metadata reports.
const Platform = "onnx"

func (s *Server) metadataOf(m *model) modelMetadata {
	md := modelMetadata{Name: m.name, Platform: Platform}
	s.mu.RLock()
	md.Versions = sortedKeys(s.models[m.name])
	s.mu.RUnlock()
	for _, io := range m.inputs {
		md.Inputs = append(md.Inputs, tensorMeta{Name: io.Name, Datatype: datatypeOf[io.DType], Shape: shapeOf(io)})
	}
	for _, io := range m.outputs {
		md.Outputs = append(md.Outputs, tensorMeta{Name: io.Name, Datatype: datatypeOf[io.DType], Shape: shapeOf(io)})
	}
	return md
}

func (s *Server) httpModelMetadata(w http.ResponseWriter, r *http.Request) {
	m, err := s.lookup(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.metadataOf(m))
}

func (s *Server) httpModelReady(w http.ResponseWriter, r *http.Request) {
	if _, err := s.lookup(r.PathValue("name"), r.PathValue("version")); err != nil {
		writeError(w, err)
		return
	}
	if !s.Ready() {
		writeError(w, errorf(kindUnavailable, "the server is not ready"))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// httpModelConfig answers a Triton-style model configuration (the fields Triton's clients read).
func (s *Server) httpModelConfig(w http.ResponseWriter, r *http.Request) {
	m, err := s.lookup(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m.config())
}

// httpModelStatistics answers the statistics extension's GET /v2/models[/NAME[/versions/V]]/stats.
func (s *Server) httpModelStatistics(w http.ResponseWriter, r *http.Request) {
	st, err := s.statistics(r.PathValue("name"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"model_stats": st})
}

func (s *Server) httpRepositoryIndex(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ready bool `json:"ready"`
	}
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, errorf(kindInvalid, "repository index request: malformed JSON: %v", err))
			return
		}
	}
	idx := s.index(req.Ready)
	if idx == nil {
		idx = []modelIndex{}
	}
	writeJSON(w, http.StatusOK, idx)
}

func (s *Server) httpRepositoryLoad(w http.ResponseWriter, r *http.Request) {
	if err := s.LoadModel(r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) httpRepositoryUnload(w http.ResponseWriter, r *http.Request) {
	if err := s.UnloadModel(r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// readBody reads a request body within the size limit, undoing a gzip or deflate
// Content-Encoding.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.cfg.maxBody {
		return nil, errorf(kindTooLarge, "request body of %d bytes is over the limit of %d bytes", r.ContentLength, s.cfg.maxBody)
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, s.cfg.maxBody)
	switch enc := strings.ToLower(r.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, errorf(kindInvalid, "gzip body: %v", err)
		}
		body = zr
	case "deflate":
		zr, err := zlib.NewReader(body)
		if err != nil {
			return nil, errorf(kindInvalid, "deflate body: %v", err)
		}
		body = zr
	default:
		return nil, errorf(kindInvalid, "Content-Encoding %q is not supported (want gzip or deflate)", enc)
	}
	// A decompressed body is bounded too.
	b, err := io.ReadAll(io.LimitReader(body, s.cfg.maxBody+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || int64(len(b)) > s.cfg.maxBody:
		return nil, errorf(kindTooLarge, "request body is over the limit of %d bytes", s.cfg.maxBody)
	case err != nil:
		return nil, errorf(kindInvalid, "reading the request body: %v", err)
	}
	return b, nil
}

// restTensor is an input of a REST inference request.
type restTensor struct {
	Name       string                     `json:"name"`
	Datatype   string                     `json:"datatype"`
	Shape      []int64                    `json:"shape"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Data       json.RawMessage            `json:"data"`
}

// restRequest is a REST inference request's JSON.
type restRequest struct {
	ID         string                     `json:"id"`
	Parameters map[string]json.RawMessage `json:"parameters"`
	Inputs     []restTensor               `json:"inputs"`
	Outputs    []struct {
		Name       string                     `json:"name"`
		Parameters map[string]json.RawMessage `json:"parameters"`
	} `json:"outputs"`
}

// paramBool reads a boolean parameter (absent: def).
func paramBool(p map[string]json.RawMessage, key string, def bool) (bool, error) {
	raw, ok := p[key]
	if !ok {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("parameter %q must be a boolean, got %s", key, raw)
	}
	return b, nil
}

// paramInt reads a non-negative integer parameter; ok is false when absent.
func paramInt(p map[string]json.RawMessage, key string) (v int64, ok bool, err error) {
	raw, ok := p[key]
	if !ok {
		return 0, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil || v < 0 {
		return 0, true, fmt.Errorf("parameter %q must be a non-negative integer, got %s", key, raw)
	}
	return v, true, nil
}

func (s *Server) httpInfer(w http.ResponseWriter, r *http.Request) {
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := s.startSpan(ctx, "ModelInfer")
	defer span.End()
	if err := s.begin(); err != nil {
		writeError(w, err)
		return
	}
	defer s.inflight.Done()
	name, version := r.PathValue("name"), r.PathValue("version")
	m, err := s.lookup(name, version)
	if err != nil {
		writeError(w, err)
		return
	}
	req, binOut, err := s.decodeREST(w, r, m)
	if err != nil {
		s.metrics.request(m, false, 0, 0, 0, 0)
		writeError(w, err)
		return
	}
	resp, err := s.infer(ctx, req, m)
	if err != nil {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return // the client has gone
		}
		writeError(w, err)
		return
	}
	s.writeREST(w, resp, binOut)
}

// decodeREST decodes a REST inference request: the JSON part and, with the binary tensor data
// extension, the raw bytes after it. binOut says, per requested output (all outputs when none
// is named), whether it is to be returned as binary data.
func (s *Server) decodeREST(w http.ResponseWriter, r *http.Request, m *model) (*inferRequest, map[string]bool, error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, nil, err
	}
	jsonPart, bin := body, []byte(nil)
	if h := r.Header.Get(headerLength); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 || n > int64(len(body)) {
			return nil, nil, errorf(kindInvalid, "%s: %q is not a length within the %d-byte body", headerLength, h, len(body))
		}
		jsonPart, bin = body[:n], body[n:]
	}
	var rr restRequest
	dec := json.NewDecoder(bytes.NewReader(jsonPart))
	if err := dec.Decode(&rr); err != nil {
		return nil, nil, errorf(kindInvalid, "model %q: malformed inference request JSON: %v", m.name, err)
	}
	if dec.More() {
		return nil, nil, errorf(kindInvalid, "model %q: data after the inference request's JSON object (binary data needs the %s header)", m.name, headerLength)
	}
	req := &inferRequest{model: m.name, version: m.version, id: rr.ID}
	if us, ok, err := paramInt(rr.Parameters, "timeout"); err != nil {
		return nil, nil, errorf(kindInvalid, "model %q: %v", m.name, err)
	} else if ok && us > 0 {
		req.timeout = time.Duration(us) * time.Microsecond
	}
	for _, in := range rr.Inputs {
		t, err := decodeRESTInput(m, in, &bin)
		if err != nil {
			return nil, nil, err
		}
		req.inputs = append(req.inputs, session.NamedTensor{Name: in.Name, Tensor: t})
	}
	if len(bin) > 0 {
		return nil, nil, errorf(kindInvalid, "model %q: %d bytes of binary data after the inputs' binary_data_size bytes", m.name, len(bin))
	}
	allBinary, err := paramBool(rr.Parameters, "binary_data_output", false)
	if err != nil {
		return nil, nil, errorf(kindInvalid, "model %q: %v", m.name, err)
	}
	binOut := map[string]bool{}
	for _, o := range rr.Outputs {
		if o.Name == "" {
			return nil, nil, errorf(kindInvalid, "model %q: a requested output has no name", m.name)
		}
		if _, ok := o.Parameters["classification"]; ok {
			return nil, nil, errorf(kindInvalid, "model %q output %q: the classification extension is not supported", m.name, o.Name)
		}
		b, err := paramBool(o.Parameters, "binary_data", allBinary)
		if err != nil {
			return nil, nil, errorf(kindInvalid, "model %q output %q: %v", m.name, o.Name, err)
		}
		req.outputs = append(req.outputs, o.Name)
		binOut[o.Name] = b
	}
	if len(rr.Outputs) == 0 {
		for _, io := range m.outputs {
			binOut[io.Name] = allBinary
		}
	}
	return req, binOut, nil
}

// decodeRESTInput decodes one input: JSON "data", or binary_data_size bytes taken from *bin.
func decodeRESTInput(m *model, in restTensor, bin *[]byte) (session.Tensor, error) {
	bad := func(format string, args ...any) error {
		return errorf(kindInvalid, "model %q input %q: %s", m.name, in.Name, fmt.Sprintf(format, args...))
	}
	if in.Name == "" {
		return session.Tensor{}, errorf(kindInvalid, "model %q: an input has no name", m.name)
	}
	d, err := parseDatatype(in.Datatype)
	if err != nil {
		return session.Tensor{}, bad("%v", err)
	}
	if in.Shape == nil {
		return session.Tensor{}, bad("no shape")
	}
	size, hasBinary, err := paramInt(in.Parameters, "binary_data_size")
	if err != nil {
		return session.Tensor{}, bad("%v", err)
	}
	var t session.Tensor
	switch {
	case hasBinary && len(in.Data) > 0 && string(in.Data) != "null":
		return session.Tensor{}, bad("has both data and binary_data_size")
	case hasBinary:
		if size > int64(len(*bin)) {
			return session.Tensor{}, bad("binary_data_size %d, but only %d bytes of binary data are left", size, len(*bin))
		}
		t, err = decodeRaw(d, in.Shape, (*bin)[:size])
		*bin = (*bin)[size:]
	case len(in.Data) == 0 || string(in.Data) == "null":
		return session.Tensor{}, bad("no data (give \"data\" or the binary_data_size parameter)")
	default:
		t, err = decodeJSONData(d, in.Shape, in.Data)
	}
	if err != nil {
		return session.Tensor{}, bad("%v", err)
	}
	return t, nil
}

// writeREST writes a REST inference response: JSON, followed by the binary outputs' bytes when
// any output is binary.
func (s *Server) writeREST(w http.ResponseWriter, resp *inferResponse, binOut map[string]bool) {
	var js bytes.Buffer
	var bin []byte
	js.WriteString(`{"model_name":`)
	writeJSONString(&js, resp.model.name)
	js.WriteString(`,"model_version":`)
	writeJSONString(&js, resp.model.version)
	if resp.id != "" {
		js.WriteString(`,"id":`)
		writeJSONString(&js, resp.id)
	}
	js.WriteString(`,"outputs":[`)
	var buf []byte
	for i, name := range resp.names {
		t := resp.outputs[i]
		if i > 0 {
			js.WriteByte(',')
		}
		js.WriteString(`{"name":`)
		writeJSONString(&js, name)
		js.WriteString(`,"datatype":"`)
		js.WriteString(datatypeOf[t.DType()])
		js.WriteString(`","shape":`)
		shape, _ := json.Marshal(t.Dims())
		if t.Dims() == nil || len(t.Dims()) == 0 {
			shape = []byte("[]")
		}
		js.Write(shape)
		var err error
		if binOut[name] {
			n := len(bin)
			if bin, err = encodeRaw(bin, t); err != nil {
				writeError(w, errorf(kindInternal, "model %q output %q: %v", resp.model.name, name, err))
				return
			}
			fmt.Fprintf(&js, `,"parameters":{"binary_data_size":%d}}`, len(bin)-n)
			continue
		}
		js.WriteString(`,"data":`)
		if buf, err = appendJSONData(buf[:0], t); err != nil {
			writeError(w, errorf(kindInternal, "model %q output %q: %v", resp.model.name, name, err))
			return
		}
		js.Write(buf)
		js.WriteByte('}')
	}
	js.WriteString("]}")
	h := w.Header()
	if len(bin) > 0 || anyTrue(binOut) {
		h.Set("Content-Type", "application/octet-stream")
		h.Set(headerLength, strconv.Itoa(js.Len()))
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(js.Len()+len(bin)))
	w.WriteHeader(http.StatusOK)
	w.Write(js.Bytes()) //nolint:errcheck // the client has gone
	w.Write(bin)        //nolint:errcheck
}

func anyTrue(m map[string]bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}
