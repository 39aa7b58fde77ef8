package registry

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/registry/api/errcode"
)

// TestListingParametersAreChecked sends bad n and last parameters to both
// listings of a registry on disk: each is a 400 naming the parameter, and no
// answer names the storage's directory (distribution answered last=%00 with
// a 500 whose detail held it).
func TestListingParametersAreChecked(t *testing.T) {
	root := t.TempDir()
	srv := httptest.NewServer(newRegistry(t, Options{Storage: onDisk(root)}))
	t.Cleanup(srv.Close)
	if code, e := putManifest(t, srv.URL, "a/one", "v1", manifest(t, srv.URL, "a/one", "one", image)); code != http.StatusCreated {
		t.Fatalf("push: %d %v", code, e)
	}

	const (
		numberInvalid = "PAGINATION_NUMBER_INVALID"
		lastInvalid   = "PAGINATION_LAST_INVALID"
	)
	type listing struct{ name, path string }
	catalog, tags := listing{"catalog", "/v2/_catalog"}, listing{"tags", "/v2/a/one/tags/list"}
	both := []listing{catalog, tags}
	for _, tc := range []struct {
		query    string
		listings []listing
		code     string // "" for a 200
	}{
		{"n=0", both, ""},
		{"n=1000", both, ""},
		{"n=1&last=", both, ""},
		{"last=a/one", []listing{catalog}, ""},
		{"last=v1", []listing{tags}, ""},
		{"n=-1", both, numberInvalid},
		{"n=abc", both, numberInvalid},
		{"n=1.5", both, numberInvalid},
		{"n=%2B5", both, numberInvalid},
		{"n=1e3", both, numberInvalid},
		{"n=%205", both, numberInvalid},
		{"n=0x10", both, numberInvalid},
		{"n=1001", both, numberInvalid},
		{"n=99999999999999999999", both, numberInvalid},
		{"n=1&n=-1", both, numberInvalid},
		{"last=%00", both, lastInvalid},
		{"last=a%00b", both, lastInvalid},
		{"last=%01", both, lastInvalid},
		{"last=%1B%5B0m", both, lastInvalid},
		{"last=%7F", both, lastInvalid},
		{"last=%C2%85", both, lastInvalid},
		{"last=..", both, lastInvalid},
		{"last=a/../b", both, lastInvalid},
		{"last=/etc/passwd", both, lastInvalid},
		{"last=" + strings.Repeat("a", 256), both, lastInvalid},
		{"last=" + strings.Repeat("a", 129), []listing{tags}, lastInvalid},
		{"last=A/one", []listing{catalog}, lastInvalid},
		{"last=a//one", []listing{catalog}, lastInvalid},
		{"last=-v1", []listing{tags}, lastInvalid},
		{"last=.v1", []listing{tags}, lastInvalid},
		{"last=v1&last=%00", both, lastInvalid},
	} {
		for _, l := range tc.listings {
			t.Run(l.name+"?"+tc.query, func(t *testing.T) {
				resp, err := http.Get(srv.URL + l.path + "?" + tc.query)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if strings.Contains(string(body), root) {
					t.Errorf("the answer names the storage directory %s: %s", root, body)
				}
				if tc.code == "" {
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d, want 200: %s", resp.StatusCode, body)
					}
					return
				}
				var e struct {
					Errors []struct {
						Code, Message string
						Detail        map[string]string
					}
				}
				if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadRequest || len(e.Errors) != 1 {
					t.Fatalf("status %d, body %s; want 400 with one error", resp.StatusCode, body)
				}
				param, _ := url.ParseQuery(tc.query)
				want := "n"
				if param.Has("last") {
					want = "last"
				}
				if got := e.Errors[0]; got.Code != tc.code || got.Detail["parameter"] != want || !strings.Contains(got.Message, `"`+want+`"`) {
					t.Errorf("error %+v, want %s naming %q", got, tc.code, want)
				}
			})
		}
	}
}

// TestServerErrorsKeepTheirDetails checks that a 5xx answer of distribution
// reaches the client with its codes and registered messages only, while
// other answers pass through untouched.
func TestServerErrorsKeepTheirDetails(t *testing.T) {
	const secret = "/var/lib/berth/data/docker/registry/v2/repositories/a"
	for _, tc := range []struct {
		name      string
		serve     func(w http.ResponseWriter)
		status    int
		want      string // the whole body
		wantCType string
	}{
		{"unknown error with a path", func(w http.ResponseWriter) {
			_ = errcode.ServeJSON(w, errcode.ErrorCodeUnknown.WithDetail(errors.New("open "+secret+": invalid argument")))
		}, 500, `{"errors":[{"code":"UNKNOWN","message":"unknown error","detail":{"requestId":"req-1"}}]}` + "\n", "application/json"},
		{"several errors with messages", func(w http.ResponseWriter) {
			_ = errcode.ServeJSON(w, errcode.Errors{
				errcode.ErrorCodeUnavailable.WithMessage("storage at " + secret + " is down"),
				errcode.ErrorCodeUnknown.WithMessage(secret),
			})
		}, 503, `{"errors":[{"code":"UNAVAILABLE","message":"service unavailable","detail":{"requestId":"req-1"}},{"code":"UNKNOWN","message":"unknown error","detail":{"requestId":"req-1"}}]}` + "\n", "application/json"},
		{"plain text", func(w http.ResponseWriter) {
			http.Error(w, "stat "+secret, http.StatusInternalServerError)
		}, 500, `{"errors":[{"code":"UNKNOWN","message":"unknown error","detail":{"requestId":"req-1"}}]}` + "\n", "application/json"},
		{"client error", func(w http.ResponseWriter) {
			_ = errcode.ServeJSON(w, errcode.ErrorCodeNameUnknown.WithDetail("a"))
		}, 404, `{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry","detail":"a"}]}` + "\n", "application/json"},
		{"success", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("ok"))
		}, 200, "ok", "text/plain"},
		{"success, read from a reader (a file sent by http.ServeContent)", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.(io.ReaderFrom).ReadFrom(strings.NewReader("ok"))
		}, 200, "ok", "text/plain"},
		{"server error, read from a reader", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.(io.ReaderFrom).ReadFrom(strings.NewReader("open " + secret))
		}, 500, `{"errors":[{"code":"UNKNOWN","message":"unknown error","detail":{"requestId":"req-1"}}]}` + "\n", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set("X-Request-Id", "req-1")
			sw := &serverErrorWriter{ResponseWriter: rec}
			tc.serve(sw)
			sw.finish(slog.New(slog.NewTextHandler(io.Discard, nil)), httptest.NewRequest(http.MethodGet, "/v2/", nil))
			if rec.Code != tc.status || rec.Body.String() != tc.want || rec.Header().Get("Content-Type") != tc.wantCType {
				t.Errorf("got %d %q %s\nwant %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.status, tc.wantCType, tc.want)
			}
		})
	}
}

// readerFromRecorder is a ResponseRecorder whose ReadFrom says it was called,
// as net/http's response writer has one that sends files with sendfile(2).
type readerFromRecorder struct {
	*httptest.ResponseRecorder
	readFrom bool
}

func (r *readerFromRecorder) ReadFrom(src io.Reader) (int64, error) {
	r.readFrom = true
	return io.Copy(r.ResponseRecorder, src)
}

// A blob read reaches the underlying writer's ReadFrom, so that net/http can
// send the file with sendfile(2) instead of copying it through a buffer.
func TestServerErrorWriterHandsReadsToReadFrom(t *testing.T) {
	rec := &readerFromRecorder{ResponseRecorder: httptest.NewRecorder()}
	sw := &serverErrorWriter{ResponseWriter: rec}
	http.ServeContent(sw, httptest.NewRequest(http.MethodGet, "/v2/a/blobs/x", nil), "x", time.Time{}, strings.NewReader("blob content"))
	if !rec.readFrom || rec.Body.String() != "blob content" || rec.Code != http.StatusOK {
		t.Errorf("ReadFrom called %v; got %d %q", rec.readFrom, rec.Code, rec.Body)
	}
}

// writeSizes is a ResponseWriter without ReadFrom, as HTTP/2's is, that
// keeps the size of every write.
type writeSizes struct {
	httptest.ResponseRecorder
	sizes []int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return len(p), nil
}

// TestReadFromWritesLargeChunks: under a writer without ReadFrom, a blob
// sent from a file goes out in copyBufferSize writes, not io.Copy's 32 KiB
// (each write of an HTTP/2 handler waits for the connection).
func TestReadFromWritesLargeChunks(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "blob")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 2*copyBufferSize+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	w := &writeSizes{}
	n, err := (&serverErrorWriter{ResponseWriter: w}).ReadFrom(f)
	if err != nil || n != 2*copyBufferSize+1 {
		t.Fatalf("ReadFrom = %d, %v; want %d bytes", n, err, 2*copyBufferSize+1)
	}
	if want := []int{copyBufferSize, copyBufferSize, 1}; !slices.Equal(w.sizes, want) {
		t.Errorf("writes of %v bytes, want %v", w.sizes, want)
	}
}
