// Package root is a fixture for apitxt.
package root

import (
	"context"

	"github.com/contextos/contextos/testdata/mod/internal/hidden"
)

const Exported, unexported = 1, 2

var ErrX error

type Store interface {
	Get(ctx context.Context, id string) (string, error)
	private()
}

type Record struct {
	ID     string
	secret int
	Embedded
	*other
}

type Embedded struct{ N int }

type other struct{}

type ID string

type Alias = Record

// Problem is public through the alias: its fields and methods are listed.
type Problem = hidden.Problem

// Finder is an alias of an internal interface.
type Finder = hidden.Finder

func New(a, b string) *Record { return nil }

func (r *Record) Hash() string   { return "" }
func (o *other) Visible() string { return "" }
func helper()                    {}
