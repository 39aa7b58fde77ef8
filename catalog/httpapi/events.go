package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// maxEventsBody caps the body of POST /events.
const maxEventsBody = 4 << 20

// mediaTypeEvents is the content type of distribution's notification
// envelope (notifications.EventsMediaType).
const mediaTypeEvents = "application/vnd.docker.distribution.events.v2+json"

// manifestMediaTypes are the media types of the manifests whose pushes the
// catalog follows; pushes of anything else (layers, configs) are ignored.
var manifestMediaTypes = map[string]bool{
	v1.MediaTypeImageManifest:                                   true,
	v1.MediaTypeImageIndex:                                      true,
	"application/vnd.docker.distribution.manifest.v2+json":      true,
	"application/vnd.docker.distribution.manifest.list.v2+json": true,
}

// envelope is the part of distribution's notification envelope
// (github.com/distribution/distribution/v3/notifications: Envelope, Event)
// that the catalog reads.
type envelope struct {
	Events []struct {
		Action string `json:"action"`
		Target struct {
			MediaType  string `json:"mediaType"`
			Digest     string `json:"digest"`
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"target"`
	} `json:"events"`
}

// events answers POST /events, distribution's notification webhook: it
// passes manifest pushes and deletions to the catalog and ignores the rest.
// Deletion events carry no media type (distribution sends the digest for a
// manifest, the tag for a tag, only the repository for a repository), so
// every deletion is passed on: events are hints the catalog checks against
// the registry.
func (h *handler) events(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r); err != nil {
		return err
	}
	body, err := readBody(w, r, "events", maxEventsBody, mediaTypeEvents, "application/json")
	if err != nil {
		return err
	}
	var env envelope
	if body = bytes.TrimSpace(body); len(body) == 0 || body[0] != '{' {
		err = errors.New("want a JSON object")
	} else {
		err = json.Unmarshal(body, &env)
	}
	if err != nil {
		return fmt.Errorf("the body is not a notification envelope: %v: %w", err, catalog.ErrInvalid)
	}

	var events []catalog.Event
	for _, e := range env.Events {
		t := e.Target
		switch {
		case t.Repository == "":
			continue
		case e.Action == catalog.EventPush && manifestMediaTypes[t.MediaType]:
		case e.Action == catalog.EventDelete && (t.MediaType == "" || manifestMediaTypes[t.MediaType]):
		default:
			continue
		}
		events = append(events, catalog.Event{
			Action:     e.Action,
			Repository: t.Repository,
			Tag:        t.Tag,
			Digest:     t.Digest,
			MediaType:  t.MediaType,
		})
	}
	if len(events) > 0 {
		if err := h.cat.Ingest(r.Context(), events); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, apiv1.Accepted{Accepted: len(events)})
}

// readBody reads the body of r, what it holds, of at most limit bytes and,
// when it has a Content-Type, of one of the media types (the first is named
// in the error).
func readBody(w http.ResponseWriter, r *http.Request, what string, limit int64, mediaTypes ...string) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !slices.Contains(mediaTypes, mt) {
			return nil, fmt.Errorf("content type %q: %w; send %s", ct, errUnsupportedMediaType, mediaTypes[0])
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("the %s body is larger than %d bytes: %w", what, limit, errTooLarge)
	}
	if err != nil {
		return nil, fmt.Errorf("read the %s body: %w", what, err)
	}
	return body, nil
}
