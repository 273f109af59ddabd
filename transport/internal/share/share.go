// Package share is the one place package transport hands its attempt
// machinery to its subpackages without exporting it: transport stores its
// implementation in Machinery from its init function, and package
// transport/internal/kit, which imports transport (so that init has run),
// reads it back as a typed interface. Nothing else writes it. (grpc-go
// shares its unexported functions between its packages the same way, in
// google.golang.org/grpc/internal.)
package share

// Machinery is package transport's implementation of kit.Machinery. It is
// written once, by transport's init, before any importer of transport
// runs.
var Machinery any
