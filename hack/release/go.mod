// Module release builds telesched's images without a container engine
// (images: the Dockerfiles' steps in Go) and publishes them and the chart
// to an OCI registry, one of its own in process if need be (the module's
// command). A module of its own so that go-containerregistry stays out of
// telesched's dependencies; it builds telesched's packages by running go
// build in the checkout, not by importing them.
module github.com/telesched/telesched/hack/release

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/google/go-containerregistry v0.22.1
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	gotest.tools/v3 v3.5.2 // indirect
)
