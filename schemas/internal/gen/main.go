// Command gen writes the published JSON Schema files into the current
// directory. Run it with `go generate ./schemas`.
package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/contextos/contextos/schemas/internal/build"
)

func main() {
	files, err := build.Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(n, files[n], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}
