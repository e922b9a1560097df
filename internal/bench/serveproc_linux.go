package bench

import "syscall"

// diesWithParent has the child killed with the bench's process, should
// that die without stopping it.
func diesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
