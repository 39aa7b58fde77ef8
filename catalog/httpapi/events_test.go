package httpapi_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/notifications"
	events "github.com/docker/go-events"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/httpapi"
)

// event builds a notification as distribution's bridge does.
func event(action, mediaType, repo, tag, dgst string) notifications.Event {
	e := notifications.Event{ID: "id-" + action, Timestamp: time.Now(), Action: action}
	e.Target.MediaType = mediaType
	e.Target.Digest = digest.Digest(dgst)
	e.Target.Repository = repo
	e.Target.Tag = tag
	e.Request = notifications.RequestRecord{ID: "req", Method: "PUT", UserAgent: "oras"}
	e.Source = notifications.SourceRecord{Addr: "registry:5000", InstanceID: "x"}
	return e
}

func envelope(t *testing.T, evs ...notifications.Event) []byte {
	t.Helper()
	env := notifications.Envelope{}
	for _, e := range evs {
		env.Events = append(env.Events, events.Event(e))
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEvents(t *testing.T) {
	m1, m2, layer := digestOf('1'), digestOf('2'), digestOf('3')
	body := envelope(t,
		event(notifications.EventActionPush, v1.MediaTypeImageManifest, "kudo/kafka", "2.5.1_1.3.2", m1),
		event(notifications.EventActionPush, v1.MediaTypeImageLayerGzip, "kudo/kafka", "", layer),
		event(notifications.EventActionPush, "application/vnd.berth.package.config.v1+json", "kudo/kafka", "", layer),
		event(notifications.EventActionPull, v1.MediaTypeImageManifest, "kudo/kafka", "2.5.1_1.3.2", m1),
		event(notifications.EventActionMount, v1.MediaTypeImageLayerGzip, "kudo/kafka", "", layer),
		event(notifications.EventActionPush, "application/vnd.docker.distribution.manifest.list.v2+json", "olm/etcd", "0.9.4", m2),
		event(notifications.EventActionPush, v1.MediaTypeImageIndex, "olm/etcd", "", m2),
		event(notifications.EventActionDelete, "", "kudo/kafka", "", m1),            // a manifest, by digest
		event(notifications.EventActionDelete, "", "kudo/kafka", "2.5.1_1.3.2", ""), // a tag
		event(notifications.EventActionDelete, "", "", "", m1),                      // no repository
	)
	want := []catalog.Event{
		{Action: catalog.EventPush, Repository: "kudo/kafka", Tag: "2.5.1_1.3.2", Digest: m1, MediaType: v1.MediaTypeImageManifest},
		{Action: catalog.EventPush, Repository: "olm/etcd", Tag: "0.9.4", Digest: m2, MediaType: "application/vnd.docker.distribution.manifest.list.v2+json"},
		{Action: catalog.EventPush, Repository: "olm/etcd", Digest: m2, MediaType: v1.MediaTypeImageIndex},
		{Action: catalog.EventDelete, Repository: "kudo/kafka", Digest: m1},
		{Action: catalog.EventDelete, Repository: "kudo/kafka", Tag: "2.5.1_1.3.2"},
	}
	for _, ct := range []string{notifications.EventsMediaType, "application/json; charset=utf-8"} {
		f := newFake()
		res := serve(t, newHandler(f, nil, nil), "POST", "/events", body, "Content-Type", ct)
		if res.status != 200 || string(res.body) != `{"accepted":5}`+"\n" {
			t.Fatalf("%s: status %d: %s", ct, res.status, res.body)
		}
		if !reflect.DeepEqual(f.ingested, want) {
			t.Errorf("%s: ingested\n%+v\nwant\n%+v", ct, f.ingested, want)
		}
	}
}

func TestEventsNothingToIngest(t *testing.T) {
	f := newFake()
	body := envelope(t, event(notifications.EventActionPull, v1.MediaTypeImageManifest, "kudo/kafka", "1.0.0", digestOf('1')))
	for _, b := range [][]byte{body, []byte(`{}`), []byte(`{"events":[]}`)} {
		if res := serve(t, newHandler(f, nil, nil), "POST", "/events", b, "Content-Type", notifications.EventsMediaType); res.status != 200 {
			t.Errorf("%s: status %d", b, res.status)
		}
	}
	if calls := f.called(); len(calls) != 0 {
		t.Errorf("catalog called with nothing to ingest: %v", calls)
	}
}

func TestEventsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		status            int
		code              string
	}{
		{"garbage", notifications.EventsMediaType, []byte("not json"), 400, "INVALID"},
		{"empty", notifications.EventsMediaType, []byte(""), 400, "INVALID"},
		{"null", notifications.EventsMediaType, []byte("null"), 400, "INVALID"},
		{"array", notifications.EventsMediaType, []byte(`[{"action":"push"}]`), 400, "INVALID"},
		{"events not a list", notifications.EventsMediaType, []byte(`{"events":5}`), 400, "INVALID"},
		{"trailing data", notifications.EventsMediaType, []byte(`{"events":[]} {"events":[]}`), 400, "INVALID"},
		{"truncated", notifications.EventsMediaType, []byte(`{"events":[{"action":"push"`), 400, "INVALID"},
		{"too large", notifications.EventsMediaType, []byte(`{"events":[],"x":"` + strings.Repeat("x", 4<<20) + `"}`), 413, "TOO_LARGE"},
		{"wrong media type", "text/plain", []byte(`{"events":[]}`), 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"malformed media type", "application/", []byte(`{"events":[]}`), 415, "UNSUPPORTED_MEDIA_TYPE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			res := serve(t, newHandler(f, nil, nil), "POST", "/events", tc.body, "Content-Type", tc.contentType)
			if res.status != tc.status || res.apiError(t).Code != tc.code {
				t.Errorf("status %d %s, want %d %s", res.status, res.body, tc.status, tc.code)
			}
			if len(f.ingested) != 0 {
				t.Errorf("ingested %v", f.ingested)
			}
		})
	}
}

func TestEventsNotMounted(t *testing.T) {
	h := httpapi.New(httpapi.Options{Catalog: newFake()})
	body := envelope(t, event(notifications.EventActionPush, v1.MediaTypeImageManifest, "kudo/kafka", "1.0.0", digestOf('1')))
	res := serve(t, h, "POST", "/events", body, "Content-Type", notifications.EventsMediaType)
	if res.status != 404 || !bytes.Contains(res.body, []byte("NOT_FOUND")) {
		t.Errorf("status %d %s, want 404", res.status, res.body)
	}
}
