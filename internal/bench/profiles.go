package bench

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/partnergiving/giving/internal/cpuprofile"
)

// Profiles of one write measurement (Options.WriteProfile): where its CPU
// goes, and apart from it, where its goroutines wait (block: channel and
// select waits, as for an append's answer or the projections; mutex: lock
// contention), each in files named after the workload, its clients and its
// keys. The block and mutex profiles count from the moment they are
// switched on, at the measurement's start, and are off between
// measurements; go tool pprof -diff_base tells one from the one before.

// blockRate samples one blocking event in every microsecond spent blocked;
// mutexFraction one contention in ten.
const (
	blockRate     = 1000
	mutexFraction = 10
)

// startProfiles starts the CPU, block and mutex profiles of one
// measurement when Options.WriteProfile is set; what it returns stops them
// and writes the files.
func (r *Report) startProfiles(name string, clients, keys int) (func() error, error) {
	if r.opts.WriteProfile == "" {
		return func() error { return nil }, nil
	}
	base := fmt.Sprintf("%s.%s.%dc%dk", r.opts.WriteProfile, slug(name), clients, keys)
	stopCPU, err := cpuprofile.Start(base+".cpu", "")
	if err != nil {
		return nil, err
	}
	runtime.SetBlockProfileRate(blockRate)
	runtime.SetMutexProfileFraction(mutexFraction)
	return func() error {
		err := stopCPU()
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
		for _, kind := range []string{"block", "mutex"} {
			err = errors.Join(err, writeProfile(base+"."+kind, kind))
		}
		return err
	}, nil
}

// slug names a workload in a file name.
func slug(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '_'
	}, name)
}
