// Package cpuprofile writes CPU profiles of the process to files: giving
// bench's whole run and its phases, and the projections' rebuild benchmark,
// which cannot import the bench (the bench imports projections).
package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Start starts a CPU profile of the process written to path.suffix (path
// alone for an empty suffix), when path is set; what it returns stops it
// and closes the file.
func Start(path, suffix string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	if suffix != "" {
		path += "." + suffix
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
