package eventlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"

	"github.com/partnergiving/giving/domain"
)

// The embedded ledger's data directory belongs to one process at a time.
// That process holds an exclusive lock on <data>/giving.lock for as long as
// the ledger is open (the operating system drops it when the process dies,
// so a crash leaves nothing stale behind), and, when its NATS server also
// listens for operator commands, records where in <data>/instance.json.
// Operator commands decide from these two files whether an instance serves
// a directory, never from whoever answers on a port.

const (
	lockFile = "giving.lock"
	// InstanceFile records the running instance of a data directory.
	InstanceFile = "instance.json"
)

// Instance is what a running instance records in its data directory.
type Instance struct {
	PID int `json:"pid"`
	// NATS is the host:port its embedded NATS server listens on for
	// operator commands, which present the directory's token (NATSToken).
	NATS      string `json:"nats"`
	StartedAt string `json:"started_at"`
}

// ErrDataDirInUse means another process has the data directory open.
var ErrDataDirInUse = errors.New("the data directory is in use by another process")

// lockDataDir takes the data directory's lock, creating the directory if
// needed. It fails at once with ErrDataDirInUse when another process holds
// it.
func lockDataDir(dir string) (*flock.Flock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	lock := flock.New(filepath.Join(dir, lockFile), flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	ok, err := lock.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if !ok {
		return nil, inUse(dir)
	}
	return lock, nil
}

// inUse says who uses dir, as far as its instance file tells.
func inUse(dir string) error {
	if inst, err := readInstance(dir); err == nil {
		return fmt.Errorf("%w: %s (pid %d, operator commands at nats://%s)", ErrDataDirInUse, dir, inst.PID, inst.NATS)
	}
	return fmt.Errorf("%w: %s", ErrDataDirInUse, dir)
}

// RunningInstance reports the instance serving the data directory dir, or
// nil when no process has it open. A process that has it open but listens
// for no operator commands (serve --nats-listen "") is an error: nothing
// can reach it, and the directory cannot be opened beside it.
func RunningInstance(dir string) (*Instance, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	lock, err := lockDataDir(dir)
	if err == nil {
		_ = lock.Unlock()
		return nil, nil
	}
	if !errors.Is(err, ErrDataDirInUse) {
		return nil, err
	}
	inst, rerr := readInstance(dir)
	if rerr != nil {
		return nil, fmt.Errorf("%w: %s, by a process that takes no operator commands (no %s: was it started with --nats-listen empty?); stop it, or restart it with --nats-listen", ErrDataDirInUse, dir, InstanceFile)
	}
	return inst, nil
}

func readInstance(dir string) (*Instance, error) {
	data, err := os.ReadFile(filepath.Join(dir, InstanceFile))
	if err != nil {
		return nil, err
	}
	var inst Instance
	if err := json.Unmarshal(data, &inst); err != nil || inst.NATS == "" {
		return nil, fmt.Errorf("%s: not an instance record", InstanceFile)
	}
	return &inst, nil
}

// writeInstance records this process as dir's instance, atomically.
func writeInstance(dir, natsAddr string) error {
	data, err := json.Marshal(Instance{PID: os.Getpid(), NATS: natsAddr, StartedAt: domain.FormatTime(time.Now())})
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, InstanceFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("instance file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, InstanceFile)); err != nil {
		return fmt.Errorf("instance file: %w", err)
	}
	return nil
}

// removeInstance removes dir's instance record. Only the lock's holder
// calls it: any record there is its own, or a dead process's.
func removeInstance(dir string) error {
	if err := os.Remove(filepath.Join(dir, InstanceFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("instance file: %w", err)
	}
	return nil
}
