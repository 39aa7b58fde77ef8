package client

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

func TestCatalogUsages(t *testing.T) {
	a := apiv1.NamespaceUsage{Namespace: "a", UsedBytes: 990, LimitBytes: 1000, Blobs: 3, OpenUploads: 1}
	for _, tc := range []struct {
		name        string
		handler     http.HandlerFunc
		want        []apiv1.NamespaceUsage
		kind        error // the error wraps it; nil: no error
		unsupported bool  // the error wraps errors.ErrUnsupported
	}{
		{"usage", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/usage" || r.Method != http.MethodGet {
				t.Errorf("%s %s", r.Method, r.URL.Path)
			}
			writeDoc(w, http.StatusOK, apiv1.Usages{Namespaces: []apiv1.NamespaceUsage{a}})
		}, []apiv1.NamespaceUsage{a}, nil, false},
		{"null namespaces", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusOK, map[string]any{"namespaces": nil})
		}, []apiv1.NamespaceUsage{}, nil, false},
		{"berth serve catalog", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusNotImplemented, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_IMPLEMENTED", Message: "this server keeps no storage usage"}}})
		}, nil, ErrRegistry, true},
		{"berth without the endpoint", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusNotFound, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_FOUND", Message: "no endpoint /api/v1/usage: not found"}}})
		}, nil, ErrNotFound, true},
		{"denied", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusForbidden, apiv1.Errors{Errors: []apiv1.Error{{Code: "DENIED", Message: "token expired"}}})
		}, nil, ErrDenied, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCatalog(t, catalogServer(t, tc.handler), Options{})
			res, err := c.Usages(context.Background())
			if tc.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(res.Namespaces, tc.want) {
					t.Errorf("namespaces %+v, want %+v", res.Namespaces, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.kind) || errors.Is(err, errors.ErrUnsupported) != tc.unsupported {
				t.Errorf("error %v: wraps %v: %t, unsupported: %t; want true, %t", err, tc.kind, errors.Is(err, tc.kind), errors.Is(err, errors.ErrUnsupported), tc.unsupported)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "usage: ") {
				t.Errorf("error %q does not start with the operation", err)
			}
		})
	}
}

func TestCatalogUsage(t *testing.T) {
	a := apiv1.NamespaceUsage{Namespace: "team-a", UsedBytes: 5 << 20, Blobs: 12}
	var requests atomic.Int32
	server := catalogServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/api/v1/namespaces/team-a/usage":
			writeDoc(w, http.StatusOK, a)
		case "/api/v1/namespaces/split/usage":
			writeDoc(w, http.StatusNotImplemented, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_IMPLEMENTED", Message: "this server keeps no storage usage"}}})
		default:
			writeDoc(w, http.StatusNotFound, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_FOUND", Message: "namespace has no usage to show"}}})
		}
	})
	c := newTestCatalog(t, server, Options{})
	got, err := c.Usage(context.Background(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if *got != a {
		t.Errorf("usage %+v, want %+v", *got, a)
	}
	for _, tc := range []struct {
		namespace   string
		kind        error
		unsupported bool
	}{
		{"nobody", ErrNotFound, false},
		{"split", ErrRegistry, true},
		{"Team-A", ErrInvalid, false},
		{"a/b", ErrInvalid, false},
		{"", ErrInvalid, false},
	} {
		_, err := c.Usage(context.Background(), tc.namespace)
		if !errors.Is(err, tc.kind) || errors.Is(err, errors.ErrUnsupported) != tc.unsupported {
			t.Errorf("%q: error %v; want one wrapping %v, unsupported %t", tc.namespace, err, tc.kind, tc.unsupported)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "usage of "+tc.namespace+": ") {
			t.Errorf("%q: error %q does not name the namespace", tc.namespace, err)
		}
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3: a malformed namespace is refused before asking", n)
	}
}
