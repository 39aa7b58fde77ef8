package mirror

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// TestRecordMirrors: a berth target records the mapping; one that refuses
// is warned about, naming the permission; a registry without the API is
// left alone.
func TestRecordMirrors(t *testing.T) {
	mirrors := []apiv1.ImageMirror{{Source: "quay.io/org/img", Mirror: "t/mirror/org/img"}}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		warn   string
	}{
		{"berth", http.StatusOK, `{"mirrors":[{"source":"quay.io/org/img","mirror":"t/mirror/org/img"}]}`, ""},
		{"denied", http.StatusForbidden, `{"errors":[{"code":"DENIED","message":"admin only"}]}`, "it needs admin on everything"},
		{"not berth", http.StatusNotFound, `404 page not found`, ""},
		{"unavailable", http.StatusServiceUnavailable, `{"errors":[{"code":"UNAVAILABLE","message":"leader election"}]}`, "did not record where the images now live"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got apiv1.ImageMirrors
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPut || r.URL.Path != "/api/v1/image-mirrors" {
					http.NotFound(w, r)
					return
				}
				if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
					t.Error(err)
				}
				if strings.HasPrefix(tc.body, "{") {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			var warnings []string
			recordMirrors(context.Background(), invClient(t), strings.TrimPrefix(srv.URL, "http://"), mirrors, func(s string) { warnings = append(warnings, s) })
			if len(got.Mirrors) != 1 || got.Mirrors[0] != mirrors[0] {
				t.Errorf("sent %+v", got)
			}
			if tc.warn == "" && len(warnings) != 0 || tc.warn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warn)) {
				t.Errorf("warnings %q, want one with %q", warnings, tc.warn)
			}
		})
	}
}
