package e2e

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// parallelTests is how many tests of this package run at once unless
// -parallel says otherwise. Go's default is one per core, which suits tests
// that compute; these mostly wait (on fsyncs, elections, restarts, timers
// and other processes). On a 2-core machine six at once took the package
// from over nine minutes to under three; eight only added contention.
const parallelTests = 6

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTests))
	}
	code := m.Run()
	// The binary the tests shared (givingBinary).
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
