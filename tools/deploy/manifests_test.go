package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

// The subset of KServe's resources the manifests use, as KServe's CRDs declare them. Checked
// against KServe v0.20 (the CRDs config/crd/full/serving.kserve.io_clusterservingruntimes.yaml,
// version v1alpha1, and serving.kserve.io_inferenceservices.yaml, version v1beta1, at kserve
// commit aaac4e294dae, after the v0.20.0 tag; the constants of pkg/constants/constants.go and
// the webhook rules of pkg/apis/serving/v1beta1/inference_service_validation.go). The manifests
// are decoded strictly (yaml.v3 KnownFields): a field the structs below do not have, or a value
// of another type, is an error, so a misspelt or misplaced field fails the test instead of
// being dropped by the API server. Every field below exists at that place in the CRD with this
// type; the checks in deploy_test.go add the CRDs' required fields and enums.

// kstring is a Kubernetes string: a YAML string scalar. Unquoted true, 8080 or null, which
// Kubernetes rejects in a map[string]string (annotations, labels, node selectors), are errors.
type kstring string

func (s *kstring) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("line %d: %q is a %s, want a string (quote it)", n.Line, n.Value, n.Tag)
	}
	*s = kstring(n.Value)
	return nil
}

// quantityRE is the CRDs' pattern for a resource quantity (int-or-string).
var quantityRE = regexp.MustCompile(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`)

// quantity is a resource quantity: an integer or a string of the CRDs' pattern.
type quantity string

func (q *quantity) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") || !quantityRE.MatchString(n.Value) {
		return fmt.Errorf("line %d: %q is not a resource quantity", n.Line, n.Value)
	}
	*q = quantity(n.Value)
	return nil
}

// intOrString is a port given by number or by name (x-kubernetes-int-or-string).
type intOrString struct {
	num  int32
	name string
}

func (p *intOrString) UnmarshalYAML(n *yaml.Node) error {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!int":
		v, err := strconv.ParseInt(n.Value, 10, 32)
		if err != nil {
			return fmt.Errorf("line %d: %v", n.Line, err)
		}
		p.num = int32(v)
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		p.name = n.Value
	default:
		return fmt.Errorf("line %d: %q is neither an integer nor a string", n.Line, n.Value)
	}
	return nil
}

type objectMeta struct {
	Name        string             `yaml:"name"`
	Namespace   string             `yaml:"namespace"`
	Labels      map[string]kstring `yaml:"labels"`
	Annotations map[string]kstring `yaml:"annotations"`
}

type supportedModelFormat struct {
	Name       string  `yaml:"name"`
	Version    *string `yaml:"version"`
	AutoSelect *bool   `yaml:"autoSelect"`
	Priority   *int32  `yaml:"priority"`
}

type containerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int32  `yaml:"containerPort"`
	Protocol      string `yaml:"protocol"`
}

type envVar struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

type resources struct {
	Requests map[string]quantity `yaml:"requests"`
	Limits   map[string]quantity `yaml:"limits"`
}

type httpGet struct {
	Path   string      `yaml:"path"`
	Port   intOrString `yaml:"port"`
	Scheme string      `yaml:"scheme"`
}

type probe struct {
	HTTPGet             *httpGet `yaml:"httpGet"`
	InitialDelaySeconds int32    `yaml:"initialDelaySeconds"`
	PeriodSeconds       int32    `yaml:"periodSeconds"`
	TimeoutSeconds      int32    `yaml:"timeoutSeconds"`
	SuccessThreshold    int32    `yaml:"successThreshold"`
	FailureThreshold    int32    `yaml:"failureThreshold"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	Privileged               *bool  `yaml:"privileged"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	Capabilities             *struct {
		Add  []string `yaml:"add"`
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

type container struct {
	Name            string           `yaml:"name"`
	Image           string           `yaml:"image"`
	Command         []string         `yaml:"command"`
	Args            []string         `yaml:"args"`
	Env             []envVar         `yaml:"env"`
	Ports           []containerPort  `yaml:"ports"`
	Resources       resources        `yaml:"resources"`
	ReadinessProbe  *probe           `yaml:"readinessProbe"`
	LivenessProbe   *probe           `yaml:"livenessProbe"`
	SecurityContext *securityContext `yaml:"securityContext"`
}

type toleration struct {
	Key               string `yaml:"key"`
	Operator          string `yaml:"operator"`
	Value             string `yaml:"value"`
	Effect            string `yaml:"effect"`
	TolerationSeconds *int64 `yaml:"tolerationSeconds"`
}

// clusterServingRuntime is serving.kserve.io/v1alpha1 ClusterServingRuntime.
type clusterServingRuntime struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Annotations           map[string]kstring     `yaml:"annotations"`
		Labels                map[string]kstring     `yaml:"labels"`
		SupportedModelFormats []supportedModelFormat `yaml:"supportedModelFormats"`
		ProtocolVersions      []string               `yaml:"protocolVersions"`
		MultiModel            *bool                  `yaml:"multiModel"`
		Disabled              *bool                  `yaml:"disabled"`
		Containers            []container            `yaml:"containers"`
		NodeSelector          map[string]kstring     `yaml:"nodeSelector"`
		Tolerations           []toleration           `yaml:"tolerations"`
	} `yaml:"spec"`
}

// modelSpec is v1beta1 ModelSpec: a container with the model's format, runtime and storage.
type modelSpec struct {
	ModelFormat struct {
		Name    string `yaml:"name"`
		Version string `yaml:"version"`
	} `yaml:"modelFormat"`
	Runtime         string          `yaml:"runtime"`
	ProtocolVersion string          `yaml:"protocolVersion"`
	StorageURI      string          `yaml:"storageUri"`
	Args            []string        `yaml:"args"`
	Env             []envVar        `yaml:"env"`
	Ports           []containerPort `yaml:"ports"`
	Resources       resources       `yaml:"resources"`
}

// inferenceService is serving.kserve.io/v1beta1 InferenceService (a predictor only).
type inferenceService struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Predictor *struct {
			MinReplicas          *int32             `yaml:"minReplicas"`
			MaxReplicas          int32              `yaml:"maxReplicas"`
			ScaleMetric          string             `yaml:"scaleMetric"`
			ScaleTarget          *int32             `yaml:"scaleTarget"`
			ContainerConcurrency *int64             `yaml:"containerConcurrency"`
			Timeout              *int64             `yaml:"timeout"`
			Annotations          map[string]kstring `yaml:"annotations"`
			Labels               map[string]kstring `yaml:"labels"`
			NodeSelector         map[string]kstring `yaml:"nodeSelector"`
			Tolerations          []toleration       `yaml:"tolerations"`
			Model                *modelSpec         `yaml:"model"`
		} `yaml:"predictor"`
	} `yaml:"spec"`
}

// decodeAll decodes every YAML document of a file strictly into a new T each.
func decodeAll[T any](path string) ([]T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var out []T
	for {
		var v T
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s (document %d): %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no YAML documents", path)
	}
	return out, nil
}
