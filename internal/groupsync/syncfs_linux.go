package groupsync

import (
	"os"

	"golang.org/x/sys/unix"
)

const supported = true

func syncfs(f *os.File) error {
	for {
		err := unix.Syncfs(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
