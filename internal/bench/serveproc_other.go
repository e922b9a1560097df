//go:build !linux

package bench

import "syscall"

// diesWithParent is nothing where the kernel cannot tie a child's life to
// its parent's; the bench still kills the child on its every way out.
func diesWithParent() *syscall.SysProcAttr { return nil }
