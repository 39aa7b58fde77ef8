//go:build !linux

package groupsync

import "os"

const supported = false

func syncfs(*os.File) error { return ErrUnsupported }
