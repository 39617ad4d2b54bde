package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// curlMarker precedes, in docs/serving.md, the curl request this test runs: the first ```sh
// block after it is the request, the first ```json block after that the answer it documents.
const curlMarker = "<!-- tools/serve runs this curl example -->"

var fenceRE = regexp.MustCompile("(?s)```(sh|json)\n(.*?)```")

// docCurlExample returns the documented request (a shell command) and its documented answer.
func docCurlExample(t *testing.T) (string, string) {
	t.Helper()
	b, err := os.ReadFile(servingDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, curlMarker)
	if i < 0 {
		t.Fatalf("%s has no %q", servingDoc, curlMarker)
	}
	var cmd, answer string
	for _, m := range fenceRE.FindAllStringSubmatch(doc[i:], -1) {
		switch {
		case cmd == "" && m[1] == "sh":
			cmd = m[2]
		case cmd != "" && m[1] == "json":
			answer = m[2]
		}
		if answer != "" {
			break
		}
	}
	if cmd == "" || answer == "" || !strings.Contains(cmd, "curl ") {
		t.Fatalf("%s: no ```sh block with a curl command and ```json answer after %q", servingDoc, curlMarker)
	}
	return cmd, answer
}

// TestCurlExample runs docs/serving.md's curl request against `loom serve` serving the
// repository the doc sets up (add.onnx as model "add" version 1), on the port the server got
// instead of 8000, and checks that the answer is the one the doc shows.
func TestCurlExample(t *testing.T) {
	cmd, answer := docCurlExample(t)
	if !strings.Contains(cmd, "localhost:8000") {
		t.Fatalf("the documented curl command does not name localhost:8000 (loom serve's default):\n%s", cmd)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on PATH")
	}
	repo := filepath.Join(t.TempDir(), "loom-models")
	writeModelRepository(t, repo, map[string]string{"add": addModel}, nil)
	srv := startServer(t, "--model-repository", repo)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.ReplaceAll(cmd, "localhost:8000", srv.httpAddr))
	out, err := run.Output()
	if err != nil {
		t.Fatalf("the documented curl command: %v\n%s", err, out)
	}
	var got, want any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the server's answer is not JSON: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(answer), &want); err != nil {
		t.Fatalf("the documented answer is not JSON: %v\n%s", err, answer)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the server answered\n%s\nthe doc shows\n%s", out, answer)
	}
}

// TestServeDemo checks docs/serving.md's first claim: with no model arguments, `loom serve`
// serves the embedded MNIST demo as model "mnist" version 1. It posts the demo's sample digits
// as JSON tensors and compares the scores with the demo's reference outputs.
func TestServeDemo(t *testing.T) {
	srv := startServer(t)
	for _, digit := range []string{"digit0", "digit2", "digit9"} {
		shape, x, err := readNpyFloat32(filepath.Join("..", "cmd", "loom", "demodata", digit+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		_, want, err := readNpyFloat32(filepath.Join("..", "cmd", "loom", "demodata", digit+"_expected.npy"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(map[string]any{"inputs": []any{map[string]any{
			"name": "Input3", "shape": shape, "datatype": "FP32", "data": x}}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post("http://"+srv.httpAddr+"/v2/models/mnist/versions/1/infer", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			ModelName string `json:"model_name"`
			Outputs   []struct {
				Name  string    `json:"name"`
				Shape []int64   `json:"shape"`
				Data  []float32 `json:"data"`
			} `json:"outputs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", digit, resp.StatusCode, err)
		}
		if res.ModelName != "mnist" || len(res.Outputs) != 1 || res.Outputs[0].Name != "Plus214_Output_0" || len(res.Outputs[0].Data) != len(want) {
			t.Fatalf("%s: answer %+v, want mnist's Plus214_Output_0 with %d scores", digit, res, len(want))
		}
		if i, d := maxMismatch(res.Outputs[0].Data, want); i >= 0 {
			t.Errorf("%s: score %d is %g, the demo's reference %g (difference %g)", digit, i, res.Outputs[0].Data[i], want[i], d)
		}
	}
}
