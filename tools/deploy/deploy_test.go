package deploy

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	containerfile   = "Containerfile"
	runtimeFile     = "kserve/servingruntime.yaml"
	isvcFile        = "kserve/inferenceservice.yaml"
	repoRoot        = "../.."
	mnistModel      = "../cmd/loom/demodata/mnist.onnx"
	kserveModelDir  = "/mnt/models" // KServe's constants.DefaultModelLocalMountPath
	kserveHTTPPort  = 8080          // KServe's constants.InferenceServiceDefaultHttpPort
	kserveContainer = "kserve-container"
)

// KServe's enums (pkg/constants: InferenceServiceProtocol; the CRD's scaleMetric enum; the
// metrics Knative's pod autoscaler takes, validateKPAMetrics) and storage URI schemes
// (SupportedStorageURIPrefixList).
var (
	kserveProtocols   = []string{"v1", "v2", "grpc-v1", "grpc-v2"}
	kserveScaleMetric = []string{"cpu", "memory", "concurrency", "rps"}
	knativeKPAMetrics = []string{"concurrency", "rps"}
	storagePrefixes   = []string{"gs://", "s3://", "pvc://", "file://", "https://", "http://", "hdfs://", "webhdfs://", "oci://", "hf://"}
	dns1123Label      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	isvcNameRE        = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`) // v1beta1.IsvcNameFmt
)

// instruction is one Containerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// stage is one FROM and the instructions under it.
type stage struct {
	image, name string
	ins         []instruction
}

func parseContainerfile(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open(containerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	sc := bufio.NewScanner(f)
	var cur strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		text := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			} else if len(f) != 1 {
				t.Fatalf("%s:%d: FROM %s: want IMAGE [AS NAME]", containerfile, in.line, in.args)
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before the first FROM", containerfile, in.line, in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a continued line", containerfile)
	}
	return stages
}

// entrypoint returns the final stage's ENTRYPOINT, which must be in exec (JSON array) form.
func entrypoint(t *testing.T, final stage) []string {
	t.Helper()
	var ep []string
	for _, in := range final.ins {
		if in.cmd == "ENTRYPOINT" {
			ep = nil
			if err := json.Unmarshal([]byte(in.args), &ep); err != nil {
				t.Fatalf("%s:%d: ENTRYPOINT is not in exec form (a JSON array): %v", containerfile, in.line, err)
			}
		}
	}
	if len(ep) < 2 {
		t.Fatalf("%s: the final stage has no ENTRYPOINT [loom, serve, ...]", containerfile)
	}
	return ep
}

// goWork reads the repository's go.work: its go version and the directories it uses.
func goWork(t *testing.T) (string, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	var version string
	var uses []string
	inUse := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "go "):
			version = strings.TrimSpace(strings.TrimPrefix(l, "go "))
		case l == "use (":
			inUse = true
		case inUse && l == ")":
			inUse = false
		case inUse && l != "" && !strings.HasPrefix(l, "//"):
			uses = append(uses, filepath.Clean(l))
		case strings.HasPrefix(l, "use ") && !strings.HasSuffix(l, "("):
			uses = append(uses, filepath.Clean(strings.TrimSpace(strings.TrimPrefix(l, "use "))))
		}
	}
	if version == "" || len(uses) == 0 {
		t.Fatalf("go.work: no go version or use directives")
	}
	return version, uses
}

var replaceRE = regexp.MustCompile(`(?m)^\s*(?:replace\s+)?\S+(?:\s+\S+)?\s+=>\s+(\.\.?/\S*)\s*$`)

// TestContainerfile checks the image's structure: a cgo build of the loom command with the Go
// release go.work asks for, from sources that hold every module the workspace uses (and every
// local replacement), then a distroless final stage that holds only that binary (no compiler,
// no shell, nothing installed), runs as a non-root user, exposes loom serve's default ports and
// starts loom serve on KServe's model directory.
func TestContainerfile(t *testing.T) {
	stages := parseContainerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%s has %d stage(s), want a build stage and a final stage", containerfile, len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	// The build stage: the Go release of go.work, cgo on, `go build -o OUT ./tools/cmd/loom`.
	goVersion, uses := goWork(t)
	m := regexp.MustCompile(`^(?:docker\.io/)?(?:library/)?golang:(\d+\.\d+)(?:[.-]\S*)?$`).FindStringSubmatch(build.image)
	if m == nil {
		t.Errorf("%s: the build stage's image %s is not an official golang image", containerfile, build.image)
	} else if !strings.HasPrefix(goVersion, m[1]) {
		t.Errorf("%s: the build stage's Go %s is not go.work's %s", containerfile, m[1], goVersion)
	}
	if build.name == "" {
		t.Errorf("%s: the build stage has no name (FROM ... AS NAME)", containerfile)
	}
	var env, out string
	var copied []string
	for _, in := range build.ins {
		switch in.cmd {
		case "ENV":
			env += " " + in.args
		case "COPY":
			f := strings.Fields(in.args)
			for _, src := range f[:len(f)-1] {
				if strings.HasPrefix(src, "--") {
					t.Errorf("%s:%d: the build stage copies with %s; want plain COPY from the build context", containerfile, in.line, src)
				}
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("%s:%d: COPY %s: not in the repository: %v", containerfile, in.line, src, err)
				}
				copied = append(copied, filepath.Clean(src))
			}
		case "RUN":
			if mm := regexp.MustCompile(`go build .*-o (\S+) \./tools/cmd/loom\b`).FindStringSubmatch(in.args); mm != nil {
				out = mm[1]
			}
		}
	}
	if !regexp.MustCompile(`(^|\s)CGO_ENABLED=1(\s|$)`).MatchString(env) {
		t.Errorf("%s: the build stage does not set CGO_ENABLED=1 (the shim and the shipped host kernels are cgo)", containerfile)
	}
	if out == "" {
		t.Fatalf("%s: the build stage has no RUN go build -o OUT ./tools/cmd/loom", containerfile)
	}
	under := func(dir string) bool {
		for _, c := range copied {
			if c == "." || dir == c || strings.HasPrefix(dir, c+"/") {
				return true
			}
		}
		return false
	}
	for _, f := range []string{"go.work", "go.work.sum"} {
		if !under(f) {
			t.Errorf("%s: the build stage does not copy %s", containerfile, f)
		}
	}
	for _, u := range uses {
		if !under(u) {
			t.Errorf("%s: the build stage does not copy %s, a module of go.work", containerfile, u)
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, u, "go.mod"))
		if err != nil {
			t.Errorf("go.work uses %s: %v", u, err)
			continue
		}
		for _, r := range replaceRE.FindAllStringSubmatch(string(b), -1) {
			if dir := filepath.Join(u, r[1]); !under(dir) {
				t.Errorf("%s: the build stage does not copy %s, which %s/go.mod replaces a module with", containerfile, dir, u)
			}
		}
	}

	// The final stage: distroless (glibc and libstdc++ for the cgo binary; no shell, no
	// package manager, no compiler), only the binary copied in, nothing run.
	distroless := regexp.MustCompile(`^gcr\.io/distroless/(static|base|cc)(-debian\d+)?(:[\w.-]+)?(@sha256:[0-9a-f]{64})?$`)
	if !distroless.MatchString(final.image) {
		t.Errorf("%s: the final image %s is not distroless (gcr.io/distroless/{static,base,cc})", containerfile, final.image)
	}
	var user, binary string
	var exposed []string
	for _, in := range final.ins {
		switch in.cmd {
		case "RUN", "ADD", "ONBUILD", "SHELL":
			t.Errorf("%s:%d: %s in the final stage; it must only receive the built binary", containerfile, in.line, in.cmd)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) != 3 || f[0] != "--from="+build.name || f[1] != out {
				t.Errorf("%s:%d: COPY %s: the final stage copies only %s from the build stage", containerfile, in.line, in.args, out)
			} else {
				binary = f[2]
			}
		case "USER":
			user = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if user == "" || uid == "root" || uid == "0" {
		t.Errorf("%s: the final stage runs as %q; want a non-root USER", containerfile, user)
	}
	for _, p := range []string{"8000", "8001"} {
		if !slices.Contains(exposed, p) && !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("%s: the final stage does not EXPOSE %s (loom serve's default ports are 8000 HTTP, 8001 gRPC)", containerfile, p)
		}
	}
	ep := entrypoint(t, final)
	if ep[0] != binary || ep[1] != "serve" {
		t.Errorf("%s: ENTRYPOINT %q; want [%s serve ...]", containerfile, ep, binary)
	}
	flags := flagMap(t, containerfile, ep[2:])
	if flags["model-dir"] != kserveModelDir {
		t.Errorf("%s: ENTRYPOINT serves --model-dir=%q; KServe mounts the model at %s", containerfile, flags["model-dir"], kserveModelDir)
	}
	if h, ok := flags["host"]; ok && h != "0.0.0.0" && h != "" {
		t.Errorf("%s: ENTRYPOINT listens on --host=%s; a pod must listen on every interface", containerfile, h)
	}
}

// flagMap parses --name=value arguments (the only form the deployment files use).
func flagMap(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok || name == "" {
			t.Errorf("%s: argument %q is not of the form --name=value", where, a)
			continue
		}
		m[name] = value
	}
	return m
}

func servingRuntime(t *testing.T) clusterServingRuntime {
	t.Helper()
	rts, err := decodeAll[clusterServingRuntime](runtimeFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(rts) != 1 {
		t.Fatalf("%s holds %d documents, want one ClusterServingRuntime", runtimeFile, len(rts))
	}
	return rts[0]
}

// runtimeContainer returns the runtime's kserve-container and its flags.
func runtimeContainer(t *testing.T, rt clusterServingRuntime) (container, map[string]string) {
	t.Helper()
	for _, c := range rt.Spec.Containers {
		if c.Name == kserveContainer {
			return c, flagMap(t, runtimeFile, c.Args)
		}
	}
	t.Fatalf("%s: no container named %s (KServe merges the predictor's model into that container)", runtimeFile, kserveContainer)
	return container{}, nil
}

func port(t *testing.T, where, flag, v string) int32 {
	t.Helper()
	p, err := strconv.ParseInt(v, 10, 32)
	if err != nil || p <= 0 || p > 65535 {
		t.Errorf("%s: --%s=%s is not a port", where, flag, v)
	}
	return int32(p)
}

// TestServingRuntime checks the ClusterServingRuntime against the v1alpha1 CRD's required
// fields and KServe's enums, and that it fits loom serve: the HTTP port KServe routes to, probes
// on the Open Inference Protocol's health endpoints, Prometheus scraping of /metrics on that
// port, the image's non-root user.
func TestServingRuntime(t *testing.T) {
	rt := servingRuntime(t)
	if rt.APIVersion != "serving.kserve.io/v1alpha1" || rt.Kind != "ClusterServingRuntime" {
		t.Errorf("%s: %s %s, want serving.kserve.io/v1alpha1 ClusterServingRuntime", runtimeFile, rt.APIVersion, rt.Kind)
	}
	if !dns1123Label.MatchString(rt.Metadata.Name) {
		t.Errorf("%s: metadata.name %q is not a DNS-1123 label", runtimeFile, rt.Metadata.Name)
	}
	if rt.Metadata.Namespace != "" {
		t.Errorf("%s: a ClusterServingRuntime is cluster-scoped; it has no namespace", runtimeFile)
	}
	onnx := false
	for i, f := range rt.Spec.SupportedModelFormats {
		if f.Name == "" {
			t.Errorf("%s: supportedModelFormats[%d] has no name (required)", runtimeFile, i)
		}
		if f.Name == "onnx" && f.AutoSelect != nil && *f.AutoSelect {
			onnx = true
		}
	}
	if !onnx {
		t.Errorf("%s: supportedModelFormats has no onnx with autoSelect: true", runtimeFile)
	}
	for _, p := range rt.Spec.ProtocolVersions {
		if !slices.Contains(kserveProtocols, p) {
			t.Errorf("%s: protocolVersions: %q is not one of KServe's %v", runtimeFile, p, kserveProtocols)
		}
	}
	for _, p := range []string{"v2", "grpc-v2"} {
		if !slices.Contains(rt.Spec.ProtocolVersions, p) {
			t.Errorf("%s: protocolVersions lacks %s", runtimeFile, p)
		}
	}
	if len(rt.Spec.Containers) == 0 {
		t.Fatalf("%s: spec.containers is required", runtimeFile)
	}
	for i, c := range rt.Spec.Containers {
		if c.Name == "" || c.Image == "" {
			t.Errorf("%s: containers[%d] needs a name (required) and an image", runtimeFile, i)
		}
	}
	c, flags := runtimeContainer(t, rt)
	if flags["model-name"] != "{{.Name}}" {
		t.Errorf("%s: --model-name=%q; want {{.Name}}, the InferenceService's name", runtimeFile, flags["model-name"])
	}
	httpPort := port(t, runtimeFile, "http-port", flags["http-port"])
	if httpPort != kserveHTTPPort {
		t.Errorf("%s: --http-port=%d; KServe routes HTTP to %d", runtimeFile, httpPort, kserveHTTPPort)
	}
	port(t, runtimeFile, "grpc-port", flags["grpc-port"])
	for _, p := range c.Ports {
		if p.ContainerPort <= 0 {
			t.Errorf("%s: a port without containerPort (required)", runtimeFile)
		}
	}
	for _, pr := range []struct {
		name string
		p    *probe
		path string
	}{{"readinessProbe", c.ReadinessProbe, "/v2/health/ready"}, {"livenessProbe", c.LivenessProbe, "/v2/health/live"}} {
		switch {
		case pr.p == nil || pr.p.HTTPGet == nil:
			t.Errorf("%s: no %s.httpGet", runtimeFile, pr.name)
		case pr.p.HTTPGet.Path != pr.path || pr.p.HTTPGet.Port.num != httpPort:
			t.Errorf("%s: %s gets %s on port %+v; want %s on the HTTP port %d", runtimeFile, pr.name, pr.p.HTTPGet.Path, pr.p.HTTPGet.Port, pr.path, httpPort)
		}
	}
	ann := rt.Spec.Annotations
	if ann["serving.kserve.io/enable-prometheus-scraping"] != "true" || ann["prometheus.kserve.io/path"] != "/metrics" ||
		ann["prometheus.kserve.io/port"] != kstring(strconv.Itoa(int(httpPort))) {
		t.Errorf("%s: spec.annotations %v; want serving.kserve.io/enable-prometheus-scraping \"true\", prometheus.kserve.io/path /metrics and prometheus.kserve.io/port %d", runtimeFile, ann, httpPort)
	}
	if len(c.Resources.Requests) == 0 || len(c.Resources.Limits) == 0 {
		t.Errorf("%s: the container sets no resource requests and limits", runtimeFile)
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: the container's securityContext must set runAsNonRoot: true and allowPrivilegeEscalation: false", runtimeFile)
	} else if sc.RunAsUser != nil {
		// The uid the image's USER names.
		stages := parseContainerfile(t)
		for _, in := range stages[len(stages)-1].ins {
			if in.cmd == "USER" {
				if uid, _, _ := strings.Cut(in.args, ":"); uid != strconv.FormatInt(*sc.RunAsUser, 10) {
					t.Errorf("%s: runAsUser %d, the image's USER is %s", runtimeFile, *sc.RunAsUser, in.args)
				}
			}
		}
	}
}

// TestInferenceServices checks the example InferenceServices against the v1beta1 CRD's required
// fields and enums and KServe's admission rules (name format, storage URI schemes, Knative's
// autoscaler metrics), and that each fits the runtime: its model format and protocol, the gRPC
// example's h2c port on the runtime's --grpc-port, a GPU example with a GPU limit and a node
// selector.
func TestInferenceServices(t *testing.T) {
	rt := servingRuntime(t)
	rc, flags := runtimeContainer(t, rt)
	isvcs, err := decodeAll[inferenceService](isvcFile)
	if err != nil {
		t.Fatal(err)
	}
	var sawHTTP, sawGRPC, sawGPU bool
	for _, s := range isvcs {
		where := fmt.Sprintf("%s (%s)", isvcFile, s.Metadata.Name)
		if s.APIVersion != "serving.kserve.io/v1beta1" || s.Kind != "InferenceService" {
			t.Errorf("%s: %s %s, want serving.kserve.io/v1beta1 InferenceService", where, s.APIVersion, s.Kind)
		}
		if !isvcNameRE.MatchString(s.Metadata.Name) {
			t.Errorf("%s: the name does not match KServe's %s", where, isvcNameRE)
		}
		p := s.Spec.Predictor
		if p == nil || p.Model == nil {
			t.Errorf("%s: spec.predictor (required) has no model", where)
			continue
		}
		m := p.Model
		if m.ModelFormat.Name != "onnx" {
			t.Errorf("%s: modelFormat.name %q (required), want onnx", where, m.ModelFormat.Name)
		}
		if m.Runtime != rt.Metadata.Name {
			t.Errorf("%s: runtime %q, want %s", where, m.Runtime, rt.Metadata.Name)
		}
		if !slices.Contains(rt.Spec.ProtocolVersions, m.ProtocolVersion) {
			t.Errorf("%s: protocolVersion %q is not one the runtime supports (%v)", where, m.ProtocolVersion, rt.Spec.ProtocolVersions)
		}
		if !slices.ContainsFunc(storagePrefixes, func(pre string) bool { return strings.HasPrefix(m.StorageURI, pre) && len(m.StorageURI) > len(pre) }) {
			t.Errorf("%s: storageUri %q has none of KServe's schemes %v", where, m.StorageURI, storagePrefixes)
		}
		if p.MinReplicas == nil || *p.MinReplicas < 0 || p.MaxReplicas < *p.MinReplicas || p.MaxReplicas < 1 {
			t.Errorf("%s: minReplicas %v, maxReplicas %d: want 0 <= min <= max, max >= 1", where, p.MinReplicas, p.MaxReplicas)
		}
		if !slices.Contains(kserveScaleMetric, p.ScaleMetric) || !slices.Contains(knativeKPAMetrics, p.ScaleMetric) {
			t.Errorf("%s: scaleMetric %q; the CRD allows %v and Knative's autoscaler %v", where, p.ScaleMetric, kserveScaleMetric, knativeKPAMetrics)
		}
		// KServe v0.20's default deployment mode is Standard (an HPA: cpu or memory); the
		// request metrics need Knative's autoscaler.
		if mode := s.Metadata.Annotations["serving.kserve.io/deploymentMode"]; mode != "Knative" && mode != "Serverless" {
			t.Errorf("%s: scaleMetric %s needs the annotation serving.kserve.io/deploymentMode: Knative (got %q)", where, p.ScaleMetric, mode)
		}
		if p.ScaleMetric == "concurrency" && (p.ScaleTarget == nil || *p.ScaleTarget < 1) {
			t.Errorf("%s: scaleMetric concurrency needs a scaleTarget >= 1 (requests in flight per replica)", where)
		}
		if m.Args != nil {
			flagMap(t, where, m.Args)
		}
		switch m.ProtocolVersion {
		case "grpc-v2":
			sawGRPC = true
			grpcPort := port(t, runtimeFile, "grpc-port", flags["grpc-port"])
			if len(m.Ports) != 1 || m.Ports[0].Name != "h2c" || m.Ports[0].ContainerPort != grpcPort {
				t.Errorf("%s: a gRPC predictor declares one port, named h2c, on the runtime's --grpc-port %d; got %+v", where, grpcPort, m.Ports)
			}
		case "v2":
			sawHTTP = true
			if len(m.Ports) > 1 || (len(m.Ports) == 1 && m.Ports[0].ContainerPort != kserveHTTPPort) {
				t.Errorf("%s: an HTTP predictor serves on port %d; got %+v", where, kserveHTTPPort, m.Ports)
			}
		}
		// KServe merges the runtime's container and the model's with a strategic merge patch
		// (ports keyed by containerPort; MergeRuntimeContainers), and Knative serves exactly
		// one port per container.
		merged := map[int32]bool{}
		for _, p := range append(slices.Clone(rc.Ports), m.Ports...) {
			merged[p.ContainerPort] = true
		}
		if len(merged) > 1 {
			t.Errorf("%s: the runtime's and the model's container ports merge into %d ports; Knative takes one", where, len(merged))
		}
		if _, ok := m.Resources.Limits["nvidia.com/gpu"]; ok {
			sawGPU = true
			if len(p.NodeSelector) == 0 {
				t.Errorf("%s: a GPU predictor without a nodeSelector", where)
			}
		}
		if s.Metadata.Annotations["serving.kserve.io/enable-prometheus-scraping"] != "true" {
			t.Errorf("%s: no serving.kserve.io/enable-prometheus-scraping: \"true\" annotation", where)
		}
	}
	if !sawHTTP || !sawGRPC || !sawGPU {
		t.Errorf("%s: want an HTTP (v2), a gRPC (grpc-v2) and a GPU example; got HTTP %v, gRPC %v, GPU %v", isvcFile, sawHTTP, sawGRPC, sawGPU)
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// loomBinary returns LOOM_BINARY, or the loom command built from this checkout once.
func loomBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LOOM_BINARY"); p != "" {
		return p
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "loom-deploy-test-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "loom")
		// Compiling the shipped kernels cold takes most of this on two cores; tools/test builds
		// the command once and passes LOOM_BINARY instead.
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "./cmd/loom")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/loom: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" && os.Getenv("LOOM_BINARY") == "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// distrolessCCLibs are the shared libraries gcr.io/distroless/cc-debian12 holds (glibc's,
// libgcc_s and libstdc++; the image adds them to distroless/base's glibc, OpenSSL and CA
// certificates).
var distrolessCCLibs = []string{"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
	"libresolv.so.2", "ld-linux-x86-64.so.2", "libgcc_s.so.1", "libstdc++.so.6", "libssl.so.3", "libcrypto.so.3"}

// TestImageLibraries checks that the shared libraries the loom binary needs (its ELF DT_NEEDED
// entries: the cgo shim links libstdc++) are all in the final stage's image.
func TestImageLibraries(t *testing.T) {
	stages := parseContainerfile(t)
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.image, "gcr.io/distroless/cc-debian12") {
		t.Fatalf("%s: the final image is %s; this check knows the libraries of gcr.io/distroless/cc-debian12", containerfile, final.image)
	}
	f, err := elf.Open(loomBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) == 0 {
		t.Log("the loom binary is static")
	}
	for _, l := range libs {
		if !slices.Contains(distrolessCCLibs, l) {
			t.Errorf("the loom binary needs %s, which %s does not have", l, final.image)
		}
	}
	t.Logf("the loom binary needs %v", libs)
}

// serveFlagRE matches a flag in `loom help serve`'s output (Go's flag package prints
// "  -name type").
var serveFlagRE = regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9-]*)\b`)

// TestServeFlags checks every flag the image and the manifests pass to `loom serve` against
// the flags the built command lists in `loom help serve`, then starts it as a KServe pod would
// (the image's entrypoint and the runtime's arguments, on a model directory laid out as KServe
// mounts it, loopback and free ports instead of the pod's) and gets the endpoints the manifests
// name: the probes, the model's readiness and the Prometheus path. SIGTERM then shuts it down
// with status 0.
func TestServeFlags(t *testing.T) {
	bin := loomBinary(t)
	help, err := exec.Command(bin, "help", "serve").CombinedOutput()
	if err != nil {
		t.Skipf("the loom command has no serve subcommand yet (`loom help serve`: %v)", err)
	}
	known := map[string]bool{}
	for _, m := range serveFlagRE.FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	if len(known) == 0 {
		t.Fatalf("`loom help serve` lists no flags:\n%s", help)
	}
	final := parseContainerfile(t)
	ep := entrypoint(t, final[len(final)-1])
	rt := servingRuntime(t)
	c, _ := runtimeContainer(t, rt)
	isvcs, err := decodeAll[inferenceService](isvcFile)
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string][]string{containerfile: ep[2:], runtimeFile: c.Args}
	for _, s := range isvcs {
		uses[isvcFile+" ("+s.Metadata.Name+")"] = s.Spec.Predictor.Model.Args
	}
	for where, args := range uses {
		for name := range flagMap(t, where, args) {
			if !known[name] {
				t.Errorf("%s passes --%s, which `loom help serve` does not list:\n%s", where, name, help)
			}
		}
	}

	// The pod's command line, with a model directory as KServe mounts one.
	dir := t.TempDir()
	b, err := os.ReadFile(mnistModel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	args := podArgs(append(slices.Clone(ep[2:]), c.Args...), dir)
	httpAddr, stop := startServe(t, bin, args)
	checkPodEndpoints(t, httpAddr, c, rt)
	stop()
}

// checkPodEndpoints gets, from a `loom serve` at httpAddr serving mnist, what the manifests
// name: the runtime container c's readiness and liveness probes, the model's readiness, and the
// Prometheus path of rt's annotations (with Triton's metrics).
func checkPodEndpoints(t *testing.T, httpAddr string, c container, rt clusterServingRuntime) {
	t.Helper()
	get := func(path string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, "/v2/models/mnist/ready"} {
		if code, body := get(path); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	if code, body := get(string(rt.Spec.Annotations["prometheus.kserve.io/path"])); code != http.StatusOK || !strings.Contains(body, "nv_inference_request_success") {
		t.Errorf("GET %s (prometheus.kserve.io/path): %d, want 200 with Triton's metrics:\n%.500s", rt.Spec.Annotations["prometheus.kserve.io/path"], code, body)
	}
}

// podArgs is args (the image's entrypoint flags and the serving runtime's) as a pod would run
// them, for a test: the model from modelDir, the InferenceService's name mnist ({{.Name}}),
// free ports (the ready line names them) on loopback.
func podArgs(args []string, modelDir string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch name {
		case "model-dir", "model-repository":
			a = "--" + name + "=" + modelDir
		case "model-name":
			a = "--model-name=mnist" // {{.Name}}
		case "http-port", "grpc-port":
			a = "--" + name + "=0"
		case "host":
			a = "--host=127.0.0.1"
		}
		out = append(out, a)
	}
	if !slices.ContainsFunc(out, func(a string) bool { return strings.HasPrefix(a, "--host=") }) {
		out = append(out, "--host=127.0.0.1")
	}
	return out
}

// startServe starts `loom ARGS...`, waits for its ready line and returns the HTTP address and
// a function that sends SIGTERM and checks the exit status is 0 (also run at cleanup).
func startServe(t *testing.T, bin string, args []string) (string, func()) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	return startReady(t, cmd, "loom serve "+strings.Join(args, " "), func() error { return cmd.Process.Signal(syscall.SIGTERM) })
}

// startReady starts cmd (a `loom serve`, perhaps inside a container), waits for its ready line
// and returns the HTTP address and a function that calls term (which should deliver SIGTERM to
// the server) and checks that cmd exits with status 0 (also run at cleanup). what names the
// command in failures.
func startReady(t *testing.T, cmd *exec.Cmd, what string, term func() error) (string, func()) {
	t.Helper()
	var stderr strings.Builder
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`^loom serve: ready http=(\S+) grpc=(\S+)$`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case ready <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	logs := func() string { mu.Lock(); defer mu.Unlock(); return stderr.String() }
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := term(); err != nil {
				t.Errorf("%s: SIGTERM: %v", what, err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s exited with %v after SIGTERM, want 0\n%s", what, err, logs())
				}
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Errorf("%s did not exit within 60 s of SIGTERM\n%s", what, logs())
			}
		})
	}
	t.Cleanup(stop)
	select {
	case addr := <-ready:
		return addr, stop
	case err := <-done:
		once.Do(func() {})
		t.Fatalf("%s exited before it was ready: %v\n%s", what, err, logs())
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s printed no ready line in 3 minutes\n%s", what, logs())
	}
	return "", stop
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
