package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
)

// The storage's marker and the replicas' records live under /berth, beside
// distribution's /docker/registry/v2 tree: no repository name reaches them,
// and garbage collection walks only distribution's tree.
const (
	markerPath  = "/berth/storage.json"
	recordsRoot = "/berth/replicas"
)

// maxRecord bounds the size of a record or marker read back.
const maxRecord = 64 << 10

// marker is the content of /berth/storage.json.
type marker struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

// storageID returns the id of the storage's marker, writing the marker on
// the first start on the storage.
func storageID(ctx context.Context, d storagedriver.StorageDriver) (string, error) {
	b, err := d.GetContent(ctx, markerPath)
	if errors.As(err, new(storagedriver.PathNotFoundError)) {
		mk := marker{ID: randomID(), Created: time.Now().UTC()}
		if b, err = json.Marshal(mk); err == nil {
			err = d.PutContent(ctx, markerPath, b)
		}
		if err != nil {
			return "", fmt.Errorf("membership: write the storage's marker %s: %w", markerPath, err)
		}
		return mk.ID, nil
	}
	if err != nil {
		return "", fmt.Errorf("membership: read the storage's marker %s: %w", markerPath, err)
	}
	var mk marker
	if err := json.Unmarshal(b, &mk); err != nil || mk.ID == "" {
		return "", fmt.Errorf("membership: the storage's marker %s is damaged (%v); delete it, and every replica on this storage writes or reads a new one at its next start", markerPath, cmpErr(err, "no id"))
	}
	return mk.ID, nil
}

func cmpErr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// storagePlace keeps the records in the storage, one object per replica.
type storagePlace struct {
	driver storagedriver.StorageDriver
}

var _ place = (*storagePlace)(nil)

func (s *storagePlace) String() string { return "the storage under " + recordsRoot }

func recordPath(replica string) string { return path.Join(recordsRoot, replica+".json") }

func (s *storagePlace) renew(ctx context.Context, r *record) error {
	r.Renewed = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.driver.PutContent(ctx, recordPath(r.Replica), b)
}

// records reads every record; the age of each is by this replica's clock.
func (s *storagePlace) records(ctx context.Context) ([]record, error) {
	names, err := s.driver.List(ctx, recordsRoot)
	if errors.As(err, new(storagedriver.PathNotFoundError)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []record
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := s.driver.GetContent(ctx, name)
		if errors.As(err, new(storagedriver.PathNotFoundError)) {
			continue // deleted since the listing: the replica left
		}
		if err != nil {
			return nil, err
		}
		var r record
		if len(b) > maxRecord || json.Unmarshal(b, &r) != nil || r.Replica == "" {
			// Not a replica's record: it expires like one never renewed.
			r = record{Replica: strings.TrimSuffix(path.Base(name), ".json")}
		}
		r.age = now.Sub(r.Renewed)
		out = append(out, r)
	}
	return out, nil
}

func (s *storagePlace) remove(ctx context.Context, replica string) error {
	err := s.driver.Delete(ctx, recordPath(replica))
	if errors.As(err, new(storagedriver.PathNotFoundError)) {
		return nil
	}
	return err
}
