module github.com/loomrt/loom/tools

go 1.26.0

require github.com/stretchr/testify v1.11.1

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/loomrt/loom/go/native v0.0.0
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.45.0 // indirect
	go.opentelemetry.io/otel/metric v1.45.0 // indirect
	go.opentelemetry.io/otel/trace v1.45.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/schollz/progressbar/v3 v3.19.1
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.44.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/loomrt/loom/go/graph v0.0.0
	github.com/loomrt/loom/go/loom v0.0.0
	github.com/loomrt/loom/go/session v0.0.0
	github.com/pmezard/go-difflib v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/loomrt/loom/go/session => ../go/session

replace github.com/loomrt/loom/go/graph => ../go/graph

replace github.com/loomrt/loom/go/native => ../go/native

replace github.com/loomrt/loom/go/loom => ../go/loom
