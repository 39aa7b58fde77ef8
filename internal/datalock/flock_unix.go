//go:build unix

package datalock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errLocked is lockFile's answer when another open file holds the lock.
var errLocked = errors.New("locked")

// lockFile takes an exclusive flock(2) of f without waiting. The kernel
// drops it when f is closed or its process ends.
func lockFile(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		case unix.EWOULDBLOCK:
			return errLocked
		}
		return err
	}
}
