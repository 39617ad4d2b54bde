module github.com/loomrt/loom/go/session

go 1.26.0

require (
	github.com/loomrt/loom/go/loom v0.0.0
	github.com/loomrt/loom/go/native v0.0.0
	github.com/stretchr/testify v1.11.1
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/loomrt/loom/go/graph v0.0.0
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/loomrt/loom/go/native => ../native

replace github.com/loomrt/loom/go/loom => ../loom

replace github.com/loomrt/loom/go/graph => ../graph
