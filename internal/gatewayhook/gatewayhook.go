// Package gatewayhook holds what package gateway lets the module's own
// packages set and nothing outside the module can. Package gateway sets
// its functions when it is initialized: a package that imports gateway
// finds them set.
package gatewayhook

// ObserveShared makes opts (a *gateway.RunOptions) tell observe (a
// func(gateway.Attempt)) every attempt as the gateway holds it, not a
// copy of it: observe must change nothing it is told, since the call's
// result and its transcript entry are built from it. The runtime's
// replay recorder observes here (it only reads and keeps); an observer
// set as RunOptions.Observe is told copies.
var ObserveShared func(opts, observe any)
