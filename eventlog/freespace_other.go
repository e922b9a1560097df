//go:build !unix

package eventlog

import "math"

// freeSpace cannot be read here: the store is taken to have room, and a
// restart that finds none fails again and waits for the next.
func freeSpace(string) (uint64, error) { return math.MaxUint64, nil }
