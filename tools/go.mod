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
	github.com/loomrt/loom/go/serve v0.0.0
	github.com/loomrt/loom/go/session v0.0.0
	github.com/pmezard/go-difflib v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.24.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
)

replace github.com/loomrt/loom/go/serve => ../go/serve

replace github.com/loomrt/loom/go/session => ../go/session

replace github.com/loomrt/loom/go/graph => ../go/graph

replace github.com/loomrt/loom/go/native => ../go/native

replace github.com/loomrt/loom/go/loom => ../go/loom
