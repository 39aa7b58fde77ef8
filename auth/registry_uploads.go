package auth

import (
	"container/list"
	"net/http"
	"sync"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/api/errcode"

	"github.com/berth-registry/berth/registry"
)

const (
	// uploadOwnersMax bounds the upload sessions whose subject is kept; past
	// it, the least recently used is forgotten.
	uploadOwnersMax = 100_000
	// uploadOwnerTTL is how long an upload session's subject is kept after
	// its last request. distribution purges uploads a week old.
	uploadOwnerTTL = 24 * time.Hour
)

// serveUploadStart opens an upload session (POST /v2/<name>/blobs/uploads/)
// and binds it to id's subject. A cross-repository mount from a repository
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
	subject := id.Name()
	sw := &statusWriter{ResponseWriter: w, onStatus: func(status int, h http.Header) {
		if uuid := h.Get("Docker-Upload-UUID"); status == http.StatusAccepted && uuid != "" {
			g.uploads.bind(uuid, subject)
		}
	}}
	g.next.ServeHTTP(sw, r)
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
// (/v2/<name>/blobs/uploads/<uuid>) from the subject that opened it. Any
// other subject, and any request on a session whose subject is no longer
// known, gets what a session that does not exist gets.
func (g *registryGate) serveUpload(w http.ResponseWriter, r *http.Request, id Identity, route registry.Route) {
	subject := id.Name()
	if owner, ok := g.uploads.owner(route.Reference); !ok || owner != subject {
		if ok {
			g.opts.Audit.Record(r, Event{Subject: subject, Action: string(Push), Resource: route.Repository, Result: ResultDenied, Reason: "the upload session was opened by another subject"})
		}
		serveError(w, errcode.ErrorCodeBlobUploadUnknown.WithDetail(distribution.ErrBlobUploadUnknown))
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	g.next.ServeHTTP(sw, r)
	if (r.Method == http.MethodPut || r.Method == http.MethodDelete) && sw.status >= 200 && sw.status <= 299 {
		g.uploads.forget(route.Reference)
	}
}

// uploadOwners remembers which subject opened each upload session, for at
// most max sessions, each until ttl after its last use. Safe for concurrent use.
type uploadOwners struct {
	mu   sync.Mutex
	max  int
	ttl  time.Duration
	now  func() time.Time
	lru  *list.List // of *uploadOwner, most recently used first
	byID map[string]*list.Element
}

type uploadOwner struct {
	uuid, subject string
	expires       time.Time
}

func newUploadOwners(limit int, ttl time.Duration, now func() time.Time) *uploadOwners {
	return &uploadOwners{max: limit, ttl: ttl, now: now, lru: list.New(), byID: map[string]*list.Element{}}
}

// bind records that subject opened the upload uuid.
func (u *uploadOwners) bind(uuid, subject string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	if e, ok := u.byID[uuid]; ok {
		u.lru.Remove(e)
	}
	u.byID[uuid] = u.lru.PushFront(&uploadOwner{uuid: uuid, subject: subject, expires: now.Add(u.ttl)})
	for e := u.lru.Back(); e != nil && (u.lru.Len() > u.max || !now.Before(e.Value.(*uploadOwner).expires)); e = u.lru.Back() {
		u.remove(e)
	}
}

// owner returns the subject that opened the upload uuid, and keeps it
// another ttl; ok is false when it is not known (any more).
func (u *uploadOwners) owner(uuid string) (subject string, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.byID[uuid]
	if !ok {
		return "", false
	}
	o := e.Value.(*uploadOwner)
	now := u.now()
	if !now.Before(o.expires) {
		u.remove(e)
		return "", false
	}
	o.expires = now.Add(u.ttl)
	u.lru.MoveToFront(e)
	return o.subject, true
}

// forget drops the upload uuid, which has completed or been cancelled.
func (u *uploadOwners) forget(uuid string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if e, ok := u.byID[uuid]; ok {
		u.remove(e)
	}
}

func (u *uploadOwners) remove(e *list.Element) {
	u.lru.Remove(e)
	delete(u.byID, e.Value.(*uploadOwner).uuid)
}
