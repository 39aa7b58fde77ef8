//go:build !unix

package datalock

import (
	"errors"
	"os"
)

// errLocked is lockFile's answer when another open file holds the lock.
var errLocked = errors.New("locked")

// lockFile takes no lock where flock(2) does not exist: there, nothing
// keeps a second process off the directory.
func lockFile(*os.File) error { return nil }
