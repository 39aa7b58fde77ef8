package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// Inventory is what GET /api/v1/inventory asks of the registry's storage
// (registry.Registry has it).
type Inventory interface {
	// Inventory calls fn for each repository that allow keeps with the
	// ordered digests of the manifests and blobs it holds, reading no
	// repository allow refuses.
	Inventory(ctx context.Context, allow func(repository string) bool, fn func(repository string, digests []digest.Digest) error) error
}

// inventory answers GET /api/v1/inventory: for each repository the caller
// may pull, the digests of the manifests and blobs the registry holds in
// it. A caller who may pull nothing gets no repositories. The document is
// written as the storage is read, one repository at a time; an error after
// the first repository aborts the response (see handle).
func (h *handler) inventory(w http.ResponseWriter, r *http.Request) error {
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	if h.inv == nil {
		return fmt.Errorf("this server runs the catalog without the registry's storage (berth serve catalog), so it cannot take an inventory; take it from the registry itself: %w", catalog.ErrNotImplemented)
	}
	head, err := json.Marshal(struct {
		MediaType string    `json:"mediaType"`
		Taken     time.Time `json:"taken"`
	}{apiv1.InventoryMediaType, time.Now().UTC()})
	if err != nil {
		return err
	}
	// Writes to bw keep their first error, which Flush returns; fn returns
	// it as soon as it happens, to stop reading the storage for a client
	// that went away.
	bw := bufio.NewWriter(w)
	started := false
	start := func() {
		started = true
		w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
		w.WriteHeader(http.StatusOK)
		bw.Write(head[:len(head)-1]) // without its closing brace
		bw.WriteString(`,"repositories":{`)
	}
	err = h.inv.Inventory(r.Context(), inventoryAllows(access), func(repo string, ds []digest.Digest) error {
		if ds == nil {
			ds = []digest.Digest{}
		}
		key, _ := json.Marshal(repo) // strings always encode
		list, err := json.Marshal(ds)
		if err != nil {
			return err
		}
		if started {
			bw.WriteByte(',')
		} else {
			start()
		}
		bw.Write(key)
		bw.WriteByte(':')
		_, err = bw.Write(list)
		return err
	})
	if err != nil {
		return err
	}
	if !started {
		start()
	}
	bw.WriteString("}}\n")
	return bw.Flush()
}

// inventoryAllows is access as a predicate over repository names,
// namespace/name. A repository of another shape (one component) is allowed
// only to a caller who may pull everything, since no rule of
// namespace/name can speak of it.
func inventoryAllows(access catalog.Access) func(string) bool {
	if access.All {
		return nil
	}
	return func(repo string) bool {
		ns, name, ok := strings.Cut(repo, "/")
		return ok && access.Allows(ns, name)
	}
}
