package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// ModelConfig is a model's serving configuration: the optional `config.json` beside its version
// directories (every field optional; unknown fields are an error, so a typo does not pass
// silently). The package documentation describes each field.
type ModelConfig struct {
	// Provider is the execution provider: "host" (the default), "cuda" or "auto".
	Provider string `json:"provider,omitempty"`
	// IntraOpThreads is the session's host worker threads (0: the cores shared among the
	// instances, at least one each).
	IntraOpThreads int `json:"intra_op_threads,omitempty"`
	// MaxBatchSize > 0 turns dynamic batching on (the model's inputs must have a variable first
	// dimension): queued requests are run together, up to this many rows in all.
	MaxBatchSize int `json:"max_batch_size,omitempty"`
	// MaxQueueDelayMicroseconds is how long the first request of a batch waits for others
	// (default 500 us; only with batching).
	MaxQueueDelayMicroseconds int64 `json:"max_queue_delay_us,omitempty"`
	// MaxQueueSize bounds the requests waiting to run (default 256); past it a request is
	// refused at once with 503 / RESOURCE_EXHAUSTED.
	MaxQueueSize int `json:"max_queue_size,omitempty"`
	// Instances is how many runs (batches) of the model may be in flight at once (default 2).
	Instances int `json:"instances,omitempty"`
	// SessionOptions are go/session's string options (session.WithOption), e.g.
	// {"loom.run_plan": "0"}.
	SessionOptions map[string]string `json:"session_options,omitempty"`
}

// The defaults of ModelConfig's zero fields.
const (
	DefaultMaxQueueSize  = 256
	DefaultQueueDelay    = 500 * time.Microsecond
	DefaultInstances     = 2
	DefaultMaxBodyBytes  = 64 << 20
	defaultReadTimeout   = 60 * time.Second
	defaultHeaderTimeout = 10 * time.Second
	defaultIdleTimeout   = 120 * time.Second
)

// withDefaults fills the zero fields and checks the rest.
func (c ModelConfig) withDefaults() (ModelConfig, error) {
	switch c.Provider {
	case "":
		c.Provider = "host"
	case "host", "cuda", "auto":
	default:
		return c, fmt.Errorf("provider %q: want host, cuda or auto", c.Provider)
	}
	if c.IntraOpThreads < 0 || c.MaxBatchSize < 0 || c.MaxQueueDelayMicroseconds < 0 || c.MaxQueueSize < 0 || c.Instances < 0 {
		return c, fmt.Errorf("intra_op_threads, max_batch_size, max_queue_delay_us, max_queue_size and instances must not be negative")
	}
	if c.MaxQueueSize == 0 {
		c.MaxQueueSize = DefaultMaxQueueSize
	}
	if c.MaxQueueDelayMicroseconds == 0 {
		c.MaxQueueDelayMicroseconds = DefaultQueueDelay.Microseconds()
	}
	if c.Instances == 0 {
		c.Instances = DefaultInstances
	}
	return c, nil
}

// readModelConfig reads a config.json; found is false when there is none.
func readModelConfig(path string) (c ModelConfig, found bool, err error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, true, fmt.Errorf("%s: %v", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, true, fmt.Errorf("%s: data after the JSON object", path)
	}
	return c, true, nil
}

// Option configures a Server (New).
type Option func(*config) error

// config is what the Options set.
type config struct {
	repository     string          // WithModelRepository
	singleDir      string          // WithModelDir
	singleName     string          // WithModelDir
	embedded       []embeddedModel // WithModelBytes
	defaults       ModelConfig     // WithDefaultModelConfig
	maxBody        int64           // WithMaxBodyBytes
	readTimeout    time.Duration   // WithTimeouts
	headerTimeout  time.Duration   // WithTimeouts
	idleTimeout    time.Duration   // WithTimeouts
	shutdownDelay  time.Duration   // WithShutdownDelay
	tracerProvider trace.TracerProvider
	logger         *slog.Logger
	serverName     string
	serverVersion  string
}

type embeddedModel struct {
	name, version string
	onnx          []byte
	cfg           ModelConfig
}

// WithModelRepository serves every model of a Triton-style repository directory:
// DIR/MODEL/VERSION/model.onnx (VERSION a positive integer) with an optional DIR/MODEL/config.json.
func WithModelRepository(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return fmt.Errorf("WithModelRepository: empty directory")
		}
		c.repository = dir
		return nil
	}
}

// WithModelDir serves one model from a directory that holds model.onnx itself (as KServe mounts
// a model at /mnt/models), under name, version "1", with DIR/config.json if present.
func WithModelDir(dir, name string) Option {
	return func(c *config) error {
		if dir == "" || name == "" {
			return fmt.Errorf("WithModelDir: directory and name must not be empty")
		}
		c.singleDir, c.singleName = dir, name
		return nil
	}
}

// WithModelBytes serves an ONNX model held in memory (the `loom serve` demo model) as name and
// version.
func WithModelBytes(name, version string, onnx []byte, cfg ModelConfig) Option {
	return func(c *config) error {
		if name == "" || version == "" || len(onnx) == 0 {
			return fmt.Errorf("WithModelBytes: name, version and model must not be empty")
		}
		c.embedded = append(c.embedded, embeddedModel{name: name, version: version, onnx: onnx, cfg: cfg})
		return nil
	}
}

// WithDefaultModelConfig is the configuration of models without a config.json (and of
// WithModelBytes models given a zero config).
func WithDefaultModelConfig(cfg ModelConfig) Option {
	return func(c *config) error {
		if _, err := cfg.withDefaults(); err != nil {
			return fmt.Errorf("WithDefaultModelConfig: %v", err)
		}
		c.defaults = cfg
		return nil
	}
}

// WithMaxBodyBytes limits a REST request's body (and a gRPC message) to n bytes (default 64 MiB);
// a larger one is refused with 413 / RESOURCE_EXHAUSTED.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxBodyBytes: %d is not positive", n)
		}
		c.maxBody = n
		return nil
	}
}

// WithTimeouts sets the HTTP server's limits on a slow client: the whole request (read, default
// 60 s), its headers (default 10 s) and an idle keep-alive connection (default 120 s).
func WithTimeouts(read, header, idle time.Duration) Option {
	return func(c *config) error {
		if read <= 0 || header <= 0 || idle <= 0 {
			return fmt.Errorf("WithTimeouts: every timeout must be positive")
		}
		c.readTimeout, c.headerTimeout, c.idleTimeout = read, header, idle
		return nil
	}
}

// WithShutdownDelay makes Shutdown wait d after readiness turns false before it stops accepting
// requests, so that a load balancer (a Kubernetes Service) sees the pod unready first.
func WithShutdownDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithShutdownDelay: negative delay")
		}
		c.shutdownDelay = d
		return nil
	}
}

// WithTracerProvider sends the server's spans (one per inference request) and the sessions'
// spans to tp; without it they go to otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		c.tracerProvider = tp
		return nil
	}
}

// WithLogger logs model loads and unloads and failed requests to l (default: slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}

// WithServerVersion sets the version ServerMetadata reports (default "devel").
func WithServerVersion(v string) Option {
	return func(c *config) error {
		c.serverVersion = v
		return nil
	}
}

// threads is the host worker threads a model's session gets: IntraOpThreads, or for 0 the
// machine's cores shared among the model's instances (at least one each), so that the runs in
// flight at once do not take more threads than there are cores (each run of a session takes
// its intra-op threads; docs/performance.md, "Serving", measures both).
func (c ModelConfig) threads() int {
	if c.IntraOpThreads > 0 {
		return c.IntraOpThreads
	}
	return max(1, runtime.NumCPU()/max(c.Instances, 1))
}
