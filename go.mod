module github.com/contextos/contextos

go 1.26.0

require (
	github.com/Masterminds/semver/v3 v3.5.0
	github.com/google/go-cmp v0.7.0
	github.com/gowebpki/jcs v1.0.2
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
)

require github.com/cespare/xxhash/v2 v2.3.0 // indirect
