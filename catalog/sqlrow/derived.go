package sqlrow

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/berth-registry/berth/catalog"
)

// Derived are the columns of an entry the stores write beside Row's: the
// JSON of its metadata's catalog.Summary and of its Examples (NULL when
// absent), and the IndexVersion it was read with.
type Derived struct {
	Summary, Examples sql.NullString
	IndexVersion      int
}

// EncodeDerived encodes the Derived columns of e.
func EncodeDerived(e *catalog.Entry) (*Derived, error) {
	d := &Derived{IndexVersion: e.IndexVersion}
	if e.Metadata != nil {
		b, err := json.Marshal(catalog.Summary(e.Metadata))
		if err != nil {
			return nil, err
		}
		d.Summary = sql.NullString{String: string(b), Valid: true}
	}
	if len(e.Examples) > 0 {
		b, err := json.Marshal(e.Examples)
		if err != nil {
			return nil, err
		}
		d.Examples = sql.NullString{String: string(b), Valid: true}
	}
	return d, nil
}

// SummaryColumns are EntryColumns with the summary in place of the
// metadata and no OLM bundle record: ScanEntry reads them, without files,
// into an entry whose Metadata is its Summary.
const SummaryColumns = `namespace, name, tag, digest, status, reason, indexed, verified,
	content_digest, content_size, content_media_type, summary, CAST(NULL AS TEXT)`

// DecodeExamples reads the examples column of namespace/name:tag; NULL is
// none.
func DecodeExamples(namespace, name, tag string, col []byte) (map[string][]string, error) {
	if col == nil {
		return nil, nil
	}
	var ex map[string][]string
	if err := json.Unmarshal(col, &ex); err != nil {
		return nil, fmt.Errorf("examples of %s/%s:%s: %w", namespace, name, tag, err)
	}
	return ex, nil
}
