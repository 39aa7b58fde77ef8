package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/api/errcode"

	"github.com/berth-registry/berth/registry"
)

// UploadOwnerParam is the query parameter of an upload session's URL that
// binds the session to the subject that opened it: a keyed MAC of the
// session's UUID and the subject. berth adds it to the Location of every
// response that names the session (POST and PATCH 202, GET 204), beside
// distribution's _state, and clients send the Location back verbatim, as
// they must for _state; no replica keeps the binding, so any replica with
// the same key checks it.
const UploadOwnerParam = "_owner"

// UploadBinder computes the binding of an upload session to a subject.
// Every replica must compute the same: Authn derives it from the token
// signing key, which replicas share.
type UploadBinder interface {
	// BindUpload returns the value of UploadOwnerParam that binds the
	// upload uuid to subject.
	BindUpload(uuid, subject string) string
}

// keyBinder binds uploads under a key of its own.
type keyBinder []byte

// BindUpload is an HMAC-SHA256 of uuid and subject under the key, truncated
// to 128 bits.
func (k keyBinder) BindUpload(uuid, subject string) string {
	mac := hmac.New(sha256.New, k)
	mac.Write([]byte(uuid))
	mac.Write([]byte{0})
	mac.Write([]byte(subject))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// processBinder binds uploads under a random key of this process: the
// binder of a gate given none, whose uploads stay on one process.
func processBinder() keyBinder {
	k := make(keyBinder, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return k
}

// serveUploadStart opens an upload session (POST /v2/<name>/blobs/uploads/)
// and binds it to id's subject, which the registry counts the session
// against (registry.uploads.maxConcurrentPerSubject). A cross-repository mount from a repository
// id may not pull loses its mount and from parameters, so that distribution
// opens a plain upload, as it does when the blob is not there to mount.
func (g *registryGate) serveUploadStart(w http.ResponseWriter, r *http.Request, id Identity, route registry.Route) {
	// distribution reads the parameters with FormValue, from the query
	// or a form body; so are they read and removed here.
	if from := r.FormValue("from"); from != "" && r.FormValue("mount") != "" {
		d := g.opts.Policy.Decide(id, from, Pull)
		g.opts.Metrics.Decision(Pull, d.Allowed)
		if !d.Allowed {
			g.opts.Audit.Record(r, Event{Subject: id.Name(), Action: string(Pull), Resource: from, Result: ResultDenied, Reason: d.Reason})
			dropMount(r)
		}
	}
	r = r.WithContext(registry.WithUploadSubject(r.Context(), id.Name()))
	g.next.ServeHTTP(g.binding(w, id), r)
}

// dropMount removes the cross-repository mount parameters from r.
func dropMount(r *http.Request) {
	for _, form := range []map[string][]string{r.Form, r.PostForm} {
		delete(form, "mount")
		delete(form, "from")
	}
	q := r.URL.Query()
	q.Del("mount")
	q.Del("from")
	r.URL.RawQuery = q.Encode()
	r.RequestURI = r.URL.RequestURI()
}

// serveUpload serves a request on an upload session
// (/v2/<name>/blobs/uploads/<uuid>) whose URL binds it to id's subject. Any
// other subject, and a request whose binding is missing or forged, gets what
// a session that does not exist gets, and is audited.
func (g *registryGate) serveUpload(w http.ResponseWriter, r *http.Request, id Identity, route registry.Route) {
	subject := id.Name()
	want := g.uploads.BindUpload(route.Reference, subject)
	if got := r.URL.Query().Get(UploadOwnerParam); !hmac.Equal([]byte(got), []byte(want)) {
		g.opts.Audit.Record(r, Event{Subject: subject, Action: string(Push), Resource: route.Repository, Result: ResultDenied,
			Reason: "the upload session's URL does not bind it to this subject (" + UploadOwnerParam + " missing, forged, or of another subject or session)"})
		serveError(w, errcode.ErrorCodeBlobUploadUnknown.WithDetail(distribution.ErrBlobUploadUnknown))
		return
	}
	g.next.ServeHTTP(g.binding(w, id), r)
}

// binding wraps w so that a response naming an upload session (its
// Docker-Upload-UUID, and a Location ending in that UUID) binds it to id's
// subject in its Location.
func (g *registryGate) binding(w http.ResponseWriter, id Identity) http.ResponseWriter {
	return &statusWriter{ResponseWriter: w, onStatus: func(_ int, h http.Header) {
		uuid, loc := h.Get("Docker-Upload-UUID"), h.Get("Location")
		if uuid == "" || loc == "" {
			return
		}
		u, err := url.Parse(loc)
		if err != nil || !strings.HasSuffix(u.Path, "/blobs/uploads/"+uuid) {
			return
		}
		q := u.Query()
		q.Set(UploadOwnerParam, g.uploads.BindUpload(uuid, id.Name()))
		u.RawQuery = q.Encode()
		h.Set("Location", u.String())
	}}
}
