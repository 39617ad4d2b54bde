module github.com/loomrt/loom/tools

go 1.26.0

require github.com/stretchr/testify v1.11.1

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
