package hidden

import "fmt"

func Hidden() {}

// Problem is exported only through an alias of the parent package.
type Problem struct {
	Path    string
	private int
}

func (p Problem) String() string { return p.Path }
func (p Problem) hidden()        {}

// Finder is exported only through an alias of the parent package.
type Finder interface {
	fmt.Stringer
	Find(id string) (Problem, error)
	hidden()
}
