package projections

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The live projection file commits without syncing: every read model is
// derived from the ledger, whose writes are synced, and the two fdatasyncs
// of a bbolt commit used to be half of a write request's latency (a request
// waits until its event shows in the local projections).
//
// That is safe against a killed process: the kernel keeps every write the
// process made, and bbolt writes a transaction's pages before the meta page
// that points to them, so after a kill the file holds exactly the
// transactions committed before it, with their applied sequence (as after a
// crash in synced mode). Only a crash of the machine can lose writes the
// kernel had not flushed, and leave a meta page pointing at pages that never
// reached the disk. So while the file is open for writing, a marker beside
// it names the running boot (the kernel's boot id); a clean close syncs the
// file and removes the marker. A marker from another boot means the machine
// went down with unsynced writes: the file is discarded before bbolt reads a
// page of it, and the projector rebuilds it from the ledger.
//
// Where the kernel has no boot id (not Linux), the file syncs every commit,
// as bbolt does by default.

// unsyncedSuffix names the marker of a file with unsynced writes.
const unsyncedSuffix = ".unsynced"

// bootIDFile is where Linux keeps the id of the running boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// currentBoot is the running boot's id, or "" where the kernel has none.
func currentBoot() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// unsyncedMarker is the marker of the projection file at path.
func unsyncedMarker(path string) string { return path + unsyncedSuffix }

// discardLostWrites removes the file at path when its marker says it was
// written without syncing during another boot than boot, and reports
// whether it did. It runs before the file is opened: such a file may be
// torn, and bbolt must not read it.
func discardLostWrites(path, boot string) (bool, error) {
	marker, err := os.ReadFile(unsyncedMarker(path))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("projections: read %s: %w", unsyncedMarker(path), err)
	}
	if strings.TrimSpace(string(marker)) == boot {
		return false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("projections: discard %s: %w", path, err)
	}
	return true, nil
}

// markUnsynced records, durably, that the file at path is about to be
// written without syncing during boot.
func markUnsynced(path, boot string) error {
	marker := unsyncedMarker(path)
	tmp := marker + ".tmp"
	if err := writeSynced(tmp, []byte(boot+"\n")); err != nil {
		return err
	}
	if err := os.Rename(tmp, marker); err != nil {
		return fmt.Errorf("projections: mark %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// markSynced removes the marker of a file that has just been synced.
func markSynced(path string) error {
	if err := os.Remove(unsyncedMarker(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("projections: unmark %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	_, err = f.Write(data)
	if err := errors.Join(err, syncClose(f)); err != nil {
		return fmt.Errorf("projections: write %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err == nil {
		err = syncClose(d)
	}
	if err != nil {
		return fmt.Errorf("projections: sync %s: %w", dir, err)
	}
	return nil
}

// syncClose syncs f and closes it.
func syncClose(f *os.File) error { return errors.Join(f.Sync(), f.Close()) }
