//go:build unix

package eventlog

import "golang.org/x/sys/unix"

// freeSpace is what an unprivileged process may still write on dir's disk.
func freeSpace(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
