// Package groupsync makes writes to one file system durable in groups: every
// caller of Sync waits for a syncfs(2) of the file system that started after
// it called, and callers that arrive while one runs share the next.
package groupsync

import (
	"errors"
	"os"
	"sync"
)

// ErrUnsupported is returned by New where syncfs(2) does not exist.
var ErrUnsupported = errors.New("groupsync: syncfs is not supported on this system")

// Syncer flushes the file system holding one directory.
type Syncer struct {
	path string
	// dir is path, opened by the first flush that finds it; only one flush
	// runs at a time.
	dir   *os.File
	flush func(*os.File) error

	mu      sync.Mutex
	done    *sync.Cond
	running bool
	started uint64 // flushes started so far; the n-th has number n
	ended   uint64 // number of the last flush that ended
	failed  uint64 // number of the last flush that failed, 0 for none
	err     error  // its error
}

// New returns a Syncer for the file system holding dir. The directory is
// opened when first needed, so it need not exist yet.
func New(dir string) (*Syncer, error) {
	if !supported {
		return nil, ErrUnsupported
	}
	s := &Syncer{path: dir, flush: syncfs}
	s.done = sync.NewCond(&s.mu)
	return s, nil
}

// Sync returns once everything written to the file system before the call
// is on stable storage, or with the error of the flush that was to put it
// there.
func (s *Syncer) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A flush already running may have missed this caller's writes: it
	// needs one that starts after now.
	need := s.started + 1
	for s.ended < need {
		if s.running {
			s.done.Wait()
			continue
		}
		s.running = true
		s.started++
		n := s.started
		s.mu.Unlock()
		err := s.flushDir()
		s.mu.Lock()
		s.running = false
		s.ended = n
		if err != nil {
			s.failed, s.err = n, err
		}
		s.done.Broadcast()
	}
	if s.failed >= need {
		return s.err
	}
	return nil
}

// flushDir opens the directory if it is not open yet, and flushes its file
// system.
func (s *Syncer) flushDir() error {
	if s.dir == nil {
		dir, err := os.Open(s.path)
		if err != nil {
			return err
		}
		s.dir = dir
	}
	return s.flush(s.dir)
}

// Close releases the directory. No Sync may run or follow.
func (s *Syncer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == nil {
		return nil
	}
	err := s.dir.Close()
	s.dir = nil
	return err
}
