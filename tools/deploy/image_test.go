package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/tools/internal/npy"
)

// ociIndex, ociManifest and ociConfig are the fields of the OCI image layout's index.json, an
// image manifest and an image configuration (image-spec v1) that the test reads.
type ociIndex struct {
	Manifests []struct {
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	} `json:"manifests"`
}

type ociManifest struct {
	Config struct {
		Digest string `json:"digest"`
	} `json:"config"`
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	} `json:"layers"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
}

// readBlob decodes the JSON blob digest of the OCI layout dir into v.
func readBlob(t *testing.T, dir, digest string, v any) {
	t.Helper()
	algo, hex, ok := strings.Cut(digest, ":")
	if !ok {
		t.Fatalf("digest %q has no algorithm", digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", algo, hex))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("blob %s: %v", digest, err)
	}
}

// buildImage runs image.sh over the loom binary into dir with tag (and extra arguments) and
// returns the digest it printed, after checking that index.json names the same one.
func buildImage(t *testing.T, bin, dir, tag string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{"image.sh", "--out", dir, "--tag", tag, "--loom", bin}, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("image.sh: %v\n%s", err, stderr.String())
	}
	f := strings.Fields(strings.TrimSpace(string(out)))
	if len(f) != 2 || f[0] != dir+":"+tag || !strings.HasPrefix(f[1], "sha256:") {
		t.Fatalf("image.sh printed %q, want %q and a digest", out, dir+":"+tag)
	}
	var idx ociIndex
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Digest != f[1] || idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tag {
		t.Fatalf("index.json %s, want one manifest %s tagged %s", b, f[1], tag)
	}
	return f[1]
}

// imageTools says why the image cannot be built and run here, or "".
func imageTools() string {
	for _, tool := range []string{"umoci", "runc", "skopeo", "apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (tools/test installs umoci and runc)"
		}
	}
	if os.Getuid() != 0 {
		return "runc needs root here"
	}
	return ""
}

// TestImage builds the `loom serve` image with image.sh (no container daemon), checks it
// against the Containerfile and the serving runtime, and runs it with runc as the runtime's
// securityContext asks (its user, no capabilities, no privilege escalation) with a read-only
// root file system and the model mounted read-only at /mnt/models, as KServe mounts it:
//   - index.json and the printed digest agree, and a second build of the same inputs gives the
//     same digest;
//   - the configuration has the Containerfile's ENTRYPOINT, USER and EXPOSE, two layers, and the
//     Debian packages' versions and hashes as labels;
//   - the file system has no shell, compiler, linker or package manager, and every library the
//     binary needs (through the libraries' own needs) is in it;
//   - in the container, `loom serve` with the runtime's arguments answers the probes, the model's
//     readiness and the metrics path, infers the demo's three digits as the library does
//     (demodata's expected outputs), and exits with status 0 on SIGTERM.
//
// The docker-archive tarball image.sh also writes (for docker load) must hold the same
// configuration. LOOM_REQUIRE_IMAGE=1 (tools/test) makes missing tools a failure instead of a
// skip; under Bazel it skips (the go.work run builds the image).
func TestImage(t *testing.T) {
	if os.Getenv("TEST_SRCDIR") != "" {
		t.Skip("under Bazel: image.sh fetches Debian packages; tools/test's go.work run builds and runs the image")
	}
	if why := imageTools(); why != "" {
		if os.Getenv("LOOM_REQUIRE_IMAGE") == "1" {
			t.Fatalf("LOOM_REQUIRE_IMAGE=1, but the image cannot be built and run: %s", why)
		}
		t.Skip(why)
	}
	stages := parseContainerfile(t)
	final := stages[len(stages)-1]
	ep := entrypoint(t, final)
	bin := loomBinary(t)
	tmp := t.TempDir()
	layout := filepath.Join(tmp, "oci")
	digest := buildImage(t, bin, layout, "test")
	// A mistyped --out is refused, and what is there is kept.
	keep := filepath.Join(tmp, "notalayout")
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(keep, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "image.sh", "--out", keep, "--loom", bin).CombinedOutput(); err == nil || !strings.Contains(string(out), "not an OCI image layout") {
		t.Errorf("image.sh --out over a directory that is not an image layout: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(keep, "precious")); err != nil {
		t.Errorf("image.sh removed what --out held: %v", err)
	}
	archive := filepath.Join(tmp, "loom-serve.tar")
	if again := buildImage(t, bin, filepath.Join(tmp, "oci2"), "test", "--docker-archive", archive); again != digest {
		t.Errorf("two builds of the same binary and packages gave %s and %s; want one digest", digest, again)
	}
	// The tarball for `docker load`: the same configuration, as skopeo reads it.
	if out, err := exec.Command("skopeo", "inspect", "--config", "docker-archive:"+archive).Output(); err != nil {
		t.Errorf("skopeo inspect docker-archive: %v", err)
	} else {
		var dc ociConfig
		if err := json.Unmarshal(out, &dc); err != nil || !slices.Equal(dc.Config.Entrypoint, ep) {
			t.Errorf("the docker archive's configuration (%v): %s", err, out)
		}
	}

	var man ociManifest
	readBlob(t, layout, digest, &man)
	var cfg ociConfig
	readBlob(t, layout, man.Config.Digest, &cfg)
	if !slices.Equal(cfg.Config.Entrypoint, ep) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("the image's entrypoint %q cmd %q, want the Containerfile's ENTRYPOINT %q and no CMD", cfg.Config.Entrypoint, cfg.Config.Cmd, ep)
	}
	var user string
	var ports []string
	for _, in := range final.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				ports = append(ports, p+"/tcp")
			}
		}
	}
	if cfg.Config.User != user {
		t.Errorf("the image runs as %q, the Containerfile's USER is %q", cfg.Config.User, user)
	}
	var exposed []string
	for p := range cfg.Config.ExposedPorts {
		exposed = append(exposed, p)
	}
	slices.Sort(exposed)
	slices.Sort(ports)
	if !slices.Equal(exposed, ports) {
		t.Errorf("the image exposes %v, the Containerfile %v", exposed, ports)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("the image is for %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if len(man.Layers) != 2 {
		t.Errorf("the image has %d layers, want 2 (the libraries, then the binary)", len(man.Layers))
	}
	for _, deb := range []string{"libc6", "libgcc-s1", "libstdc++6"} {
		if l := cfg.Config.Labels["dev.loomrt.image.deb."+deb]; !strings.Contains(l, " sha256:") {
			t.Errorf("label dev.loomrt.image.deb.%s = %q, want the package's version and sha256", deb, l)
		}
	}

	// The file system, as umoci unpacks it into a runtime bundle.
	bundle := filepath.Join(tmp, "bundle")
	if out, err := exec.Command("umoci", "unpack", "--image", layout+":test", bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, out)
	}
	rootfs := filepath.Join(bundle, "rootfs")
	checkImageFiles(t, rootfs, ep[0])

	// The container, as the serving runtime's pod runs it.
	rt := servingRuntime(t)
	c, _ := runtimeContainer(t, rt)
	models := filepath.Join(tmp, "models")
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(mnistModel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(models, "model.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(bundle, "config.json")
	var spec map[string]any
	sb, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sb, &spec); err != nil {
		t.Fatal(err)
	}
	process := spec["process"].(map[string]any)
	args := anyStrings(process["args"])
	if !slices.Equal(args, ep) {
		t.Errorf("umoci's runtime bundle runs %q, want the entrypoint %q", args, ep)
	}
	// The runtime's arguments after the entrypoint, as Kubernetes appends a container's args.
	process["args"] = append(args, podArgs(c.Args, "/mnt/models")...)
	process["terminal"] = false
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			if u := process["user"].(map[string]any); int64(u["uid"].(float64)) != *sc.RunAsUser {
				t.Errorf("the image runs as uid %v, the serving runtime's runAsUser is %d", u["uid"], *sc.RunAsUser)
			}
		}
		if sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, "ALL") {
			process["capabilities"] = map[string]any{}
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			process["noNewPrivileges"] = true
		}
	}
	spec["root"] = map[string]any{"path": "rootfs", "readonly": true}
	spec["mounts"] = append(spec["mounts"].([]any), map[string]any{
		"destination": "/mnt/models", "type": "bind", "source": models, "options": []string{"rbind", "ro"}})
	// The host's network namespace, so that the test reaches the server on loopback.
	linux := spec["linux"].(map[string]any)
	var ns []any
	for _, n := range linux["namespaces"].([]any) {
		if n.(map[string]any)["type"] != "network" {
			ns = append(ns, n)
		}
	}
	linux["namespaces"] = ns
	sb, err = json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, sb, 0o644); err != nil {
		t.Fatal(err)
	}
	id := "loom-image-test-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { exec.Command("runc", "delete", "--force", id).Run() })
	run := exec.Command("runc", "run", "--bundle", bundle, id)
	addr, stop := startReady(t, run, "runc run (the image)", func() error {
		if out, err := exec.Command("runc", "kill", id, "TERM").CombinedOutput(); err != nil {
			return fmt.Errorf("runc kill: %v: %s", err, out)
		}
		return nil
	})
	checkPodEndpoints(t, addr, c, rt)
	for _, d := range []string{"digit0", "digit2", "digit9"} {
		inferDemoDigit(t, addr, d)
	}
	stop()
}

// anyStrings converts a decoded JSON array of strings.
func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// checkImageFiles checks the image's file system at rootfs: no shell, compiler, linker or
// package manager anywhere in it, and every shared library the binary at bin (a path inside
// the image) needs, and those libraries need in turn, present in its library directories.
func checkImageFiles(t *testing.T, rootfs, bin string) {
	t.Helper()
	banned := map[string]bool{}
	for _, n := range []string{"sh", "bash", "dash", "ash", "busybox", "gcc", "cc", "c++", "g++", "cpp", "clang", "zig",
		"go", "ld", "ld.bfd", "ld.gold", "as", "nvcc", "ptxas", "tcc", "dpkg", "apt", "apt-get", "apk", "rpm", "pip"} {
		banned[n] = true
	}
	err := filepath.WalkDir(rootfs, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && banned[d.Name()] {
			t.Errorf("the image holds %s", strings.TrimPrefix(p, rootfs))
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "libnvrtc") {
			t.Errorf("the image holds NVRTC (%s): the shipped cubins need no compiler", strings.TrimPrefix(p, rootfs))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	libDirs := []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"}
	find := func(name string) string {
		for _, d := range libDirs {
			if _, err := os.Stat(filepath.Join(rootfs, d, name)); err == nil {
				return filepath.Join(rootfs, d, name)
			}
		}
		return ""
	}
	seen := map[string]bool{}
	queue := []string{filepath.Join(rootfs, bin)}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		f, err := elf.Open(p)
		if err != nil {
			t.Errorf("%s: %v", strings.TrimPrefix(p, rootfs), err)
			continue
		}
		libs, err := f.ImportedLibraries()
		interp := ""
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b, _ := io.ReadAll(prog.Open())
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", strings.TrimPrefix(p, rootfs), err)
			continue
		}
		if interp != "" {
			if _, err := os.Stat(filepath.Join(rootfs, interp)); err != nil {
				t.Errorf("%s's interpreter %s is not in the image", strings.TrimPrefix(p, rootfs), interp)
			}
		}
		for _, l := range libs {
			if seen[l] {
				continue
			}
			seen[l] = true
			if q := find(l); q == "" {
				t.Errorf("%s needs %s, which the image does not hold", strings.TrimPrefix(p, rootfs), l)
			} else {
				queue = append(queue, q)
			}
		}
	}
	if len(seen) == 0 {
		t.Logf("the binary is static")
	}
}

// inferDemoDigit posts demodata's NAME.npy to mnist over REST (JSON tensors) and compares the
// output with NAME_expected.npy, which the library's run produced.
func inferDemoDigit(t *testing.T, addr, name string) {
	t.Helper()
	x, err := npy.Read(filepath.Join(filepath.Dir(mnistModel), name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := npy.Read(filepath.Join(filepath.Dir(mnistModel), name+"_expected.npy"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"inputs": []map[string]any{{
		"name": "Input3", "datatype": "FP32", "shape": x.Shape(), "data": x.Float64s()}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v2/models/mnist/infer", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("infer %s: %v", name, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("infer %s: %d %s", name, resp.StatusCode, rb)
	}
	var out struct {
		Outputs []struct {
			Shape []int64   `json:"shape"`
			Data  []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(rb, &out); err != nil || len(out.Outputs) != 1 {
		t.Fatalf("infer %s: %v: %s", name, err, rb)
	}
	w := want.Float64s()
	got := out.Outputs[0].Data
	if len(got) != len(w) {
		t.Fatalf("infer %s: %d values, want %d", name, len(got), len(w))
	}
	for i := range w {
		if math.Abs(got[i]-w[i]) > 1e-4*math.Max(1, math.Abs(w[i])) {
			t.Errorf("infer %s: output %d is %g, the library's %g", name, i, got[i], w[i])
		}
	}
}
