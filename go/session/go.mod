module github.com/loomrt/loom/go/session

go 1.26.0

require (
	github.com/loomrt/loom/go/loom v0.0.0
	github.com/loomrt/loom/go/native v0.0.0
	github.com/stretchr/testify v1.11.1
	go.opentelemetry.io/otel v1.45.0
	go.opentelemetry.io/otel/sdk v1.45.0
	go.opentelemetry.io/otel/trace v1.45.0
	golang.org/x/image v0.46.0
	gonum.org/v1/gonum v0.17.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/metric v1.45.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/loomrt/loom/go/graph v0.0.0
	github.com/loomrt/loom/kernels v0.0.0
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.50.0
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/loomrt/loom/go/native => ../native

replace github.com/loomrt/loom/go/loom => ../loom

replace github.com/loomrt/loom/go/graph => ../graph

replace github.com/loomrt/loom/kernels => ../../kernels
