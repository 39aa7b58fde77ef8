package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// SecretPrefix starts every robot secret: "berth_" and the base64url of 32
// random bytes.
const SecretPrefix = "berth_"

// maxRobotRequest bounds the body of a robot creation.
const maxRobotRequest = 64 << 10

// RobotsOptions configure RobotsHandler.
type RobotsOptions struct {
	// Store keeps the robots. Required.
	Store RobotStore
	// Policy decides who administers a namespace; nil allows everyone.
	Policy *Policy
	// MaxExpiry is the longest lifetime a robot may be given.
	MaxExpiry time.Duration
	// Audit records creations, revocations and denials.
	Audit *Auditor
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// RobotCreation is the body of POST /api/v1/robots. Exactly one of
// ExpiresIn and ExpiresAt is required: robots always expire.
type RobotCreation struct {
	Namespace   string       `json:"namespace"`
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Scopes      []RobotScope `json:"scopes"`
	// ExpiresIn is a Go duration from now ("720h").
	ExpiresIn string `json:"expiresIn"`
	// ExpiresAt is an RFC 3339 time.
	ExpiresAt string `json:"expiresAt"`
}

// RobotCreated is the answer to POST /api/v1/robots: the robot and the
// credentials it logs in with. The secret is shown here only.
type RobotCreated struct {
	Robot    *Robot `json:"robot"`
	Username string `json:"username"`
	Secret   string `json:"secret"`
}

// RobotList is the answer to GET /api/v1/robots.
type RobotList struct {
	Robots []*Robot `json:"robots"`
}

// RobotsHandler serves the robots API, mounted at /api/v1/robots and
// /api/v1/robots/*, inside API (which puts the caller's identity in the
// context):
//
//	POST   /api/v1/robots                    create (RobotCreation) → 201 RobotCreated
//	GET    /api/v1/robots[?namespace=NS]     list → 200 RobotList
//	GET    /api/v1/robots/{namespace}/{name} → 200 Robot
//	DELETE /api/v1/robots/{namespace}/{name} revoke → 204
//
// Each needs admin on the namespace: Decide(identity, NamespaceResource(ns),
// Admin). A namespace in which the caller may neither administer nor pull
// anything looks like one without robots: its robots are 404 and its list
// empty, and a list without namespace covers only the namespaces the caller
// administers. A revoked or expired robot stays listed. Errors are JSON
// documents in the catalog API's format; those of bad input name the field
// (detail.field).
func RobotsHandler(opts RobotsOptions) http.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &robotsHandler{RobotsOptions: opts}
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no endpoint "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" "+r.URL.Path+": method not allowed")
	})
	r.Post("/api/v1/robots", h.create)
	r.Get("/api/v1/robots", h.list)
	r.Get("/api/v1/robots/{namespace}/{name}", h.get)
	r.Delete("/api/v1/robots/{namespace}/{name}", h.revoke)
	return r
}

type robotsHandler struct {
	RobotsOptions
}

// fieldError is bad input in one field of a request.
type fieldError struct {
	status int
	field  string
	msg    string
}

func (e *fieldError) write(w http.ResponseWriter) {
	writeJSON(w, e.status, apiv1.Errors{Errors: []apiv1.Error{{
		Code: errorCode(e.status), Message: e.msg,
		Detail: map[string]string{"field": e.field},
	}}})
}

// errorCode is the code of the error documents of status.
func errorCode(status int) string {
	switch status {
	case http.StatusConflict:
		return "CONFLICT"
	case http.StatusRequestEntityTooLarge:
		return "TOO_LARGE"
	}
	return "INVALID"
}

// invalid is a 400 naming field.
func invalid(field, format string, args ...any) *fieldError {
	return &fieldError{status: http.StatusBadRequest, field: field, msg: fmt.Sprintf(format, args...)}
}

// create answers POST /api/v1/robots.
func (h *robotsHandler) create(w http.ResponseWriter, r *http.Request) {
	id := IdentityFrom(r.Context())
	req, ferr := decodeCreation(w, r)
	if ferr != nil {
		ferr.write(w)
		return
	}
	if err := validName("namespace", req.Namespace); err != nil {
		invalid("namespace", "%s", err).write(w)
		return
	}
	if !h.administers(w, r, id, req.Namespace, "robot.create", false) {
		return
	}
	now := h.Now().UTC()
	robot := &Robot{
		Namespace: req.Namespace, Name: req.Name, Description: req.Description, Scopes: req.Scopes,
		CreatedBy: id.Name(), CreatedAt: now,
	}
	switch {
	case req.ExpiresIn == "" && req.ExpiresAt == "":
		invalid("expiresIn", "expiresIn or expiresAt is required: robots always expire (at most %s from now)", h.MaxExpiry).write(w)
		return
	case req.ExpiresIn != "" && req.ExpiresAt != "":
		invalid("expiresAt", "give expiresIn or expiresAt, not both").write(w)
		return
	case req.ExpiresIn != "":
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil {
			invalid("expiresIn", "want a duration like \"720h\" (got %q)", req.ExpiresIn).write(w)
			return
		}
		robot.ExpiresAt = now.Add(d)
	default:
		t, err := time.Parse(time.RFC3339, req.ExpiresAt)
		if err != nil {
			invalid("expiresAt", "want an RFC 3339 time like \"2030-01-02T15:04:05Z\" (got %q)", req.ExpiresAt).write(w)
			return
		}
		robot.ExpiresAt = t.UTC()
	}
	if err := robot.Validate(now, h.MaxExpiry); err != nil {
		field, _, _ := strings.Cut(err.Error(), ":")
		if field == "expiry" && req.ExpiresIn != "" {
			field = "expiresIn"
		} else if field == "expiry" {
			field = "expiresAt"
		}
		invalid(field, "%s", err).write(w)
		return
	}
	secret, err := newSecret()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error: no random secret")
		return
	}
	sum := sha256.Sum256([]byte(secret))
	robot.SecretHash = sum[:]
	switch err := h.Store.Create(r.Context(), robot); {
	case errors.Is(err, ErrRobotExists):
		(&fieldError{status: http.StatusConflict, field: "name",
			msg: fmt.Sprintf("robot %s exists (revoked robots keep their name)", robot.Username())}).write(w)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error: the robot could not be stored")
		return
	}
	h.Audit.Record(r, Event{Subject: id.Name(), Action: "robot.create", Resource: robot.Username(), Result: ResultOK})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, RobotCreated{Robot: robot, Username: robot.Username(), Secret: secret})
}

// decodeCreation reads the body of a creation: one JSON object of known
// fields, of at most maxRobotRequest bytes.
func decodeCreation(w http.ResponseWriter, r *http.Request) (*RobotCreation, *fieldError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRobotRequest))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &fieldError{status: http.StatusRequestEntityTooLarge, field: "body", msg: fmt.Sprintf("the body is larger than %d bytes", maxRobotRequest)}
	}
	if err != nil {
		return nil, invalid("body", "the body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req RobotCreation
	if err := dec.Decode(&req); err != nil {
		field := "body"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field = te.Field
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field = strings.Trim(name, `"`)
		}
		return nil, invalid(field, "bad JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, invalid("body", "bad JSON body: more than one value")
	}
	return &req, nil
}

// list answers GET /api/v1/robots[?namespace=NS].
func (h *robotsHandler) list(w http.ResponseWriter, r *http.Request) {
	id := IdentityFrom(r.Context())
	q := r.URL.Query()
	for k, v := range q {
		if k != "namespace" || len(v) > 1 {
			invalid(k, "unknown or repeated query parameter %q: only namespace is taken, once", k).write(w)
			return
		}
	}
	ns := q.Get("namespace")
	if ns != "" {
		if err := validName("namespace", ns); err != nil {
			invalid("namespace", "%s", err).write(w)
			return
		}
		if !h.administers(w, r, id, ns, "robot.list", true) {
			return
		}
	}
	robots, err := h.Store.List(r.Context(), ns)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error: the robots could not be read")
		return
	}
	if ns == "" {
		robots = slices.DeleteFunc(robots, func(rb *Robot) bool {
			return !h.Policy.Allowed(id, NamespaceResource(rb.Namespace), Admin)
		})
	}
	writeJSON(w, http.StatusOK, RobotList{Robots: robots})
}

// get answers GET /api/v1/robots/{namespace}/{name}.
func (h *robotsHandler) get(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := h.named(w, r, "robot.get")
	if !ok {
		return
	}
	robot, err := h.Store.Get(r.Context(), ns, name)
	if err != nil {
		h.storeError(w, ns, name, err)
		return
	}
	writeJSON(w, http.StatusOK, robot)
}

// revoke answers DELETE /api/v1/robots/{namespace}/{name}.
func (h *robotsHandler) revoke(w http.ResponseWriter, r *http.Request) {
	ns, name, ok := h.named(w, r, "robot.revoke")
	if !ok {
		return
	}
	if err := h.Store.Revoke(r.Context(), ns, name, h.Now().UTC()); err != nil {
		h.storeError(w, ns, name, err)
		return
	}
	id := IdentityFrom(r.Context())
	h.Audit.Record(r, Event{Subject: id.Name(), Action: "robot.revoke", Resource: (&Robot{Namespace: ns, Name: name}).Username(), Result: ResultOK})
	w.WriteHeader(http.StatusNoContent)
}

// named checks the path of a named robot and that the caller administers
// its namespace; when not, it has answered.
func (h *robotsHandler) named(w http.ResponseWriter, r *http.Request, action string) (ns, name string, ok bool) {
	ns, name = chi.URLParam(r, "namespace"), chi.URLParam(r, "name")
	if len(r.URL.RawQuery) > 0 {
		invalid("query", "this endpoint takes no query parameters").write(w)
		return "", "", false
	}
	for _, p := range [][2]string{{"namespace", ns}, {"name", name}} {
		if err := validName(p[0], p[1]); err != nil {
			invalid(p[0], "%s", err).write(w)
			return "", "", false
		}
	}
	if !h.administers(w, r, IdentityFrom(r.Context()), ns, action, false) {
		return "", "", false
	}
	return ns, name, true
}

// administers reports whether id may administer namespace ns. When not, it
// records the denial and answers: 403 to a creation, and to a caller who may
// pull something in ns; to any other, ns looks like a namespace without
// robots (an empty list when emptyList, else the 404 of a robot that does not
// exist). A 403 to a creation tells nothing: it does not depend on what the
// namespace holds.
func (h *robotsHandler) administers(w http.ResponseWriter, r *http.Request, id Identity, ns, action string, emptyList bool) bool {
	d := h.Policy.Decide(id, NamespaceResource(ns), Admin)
	if d.Allowed {
		return true
	}
	h.Audit.Record(r, Event{Subject: id.Name(), Action: action, Resource: NamespaceResource(ns), Result: ResultDenied, Reason: d.Reason})
	switch {
	case r.Method == http.MethodPost || h.Policy.coverage(id, ns) != catalog.CoversNone:
		writeError(w, http.StatusForbidden, "DENIED", fmt.Sprintf("managing the robots of namespace %s needs admin on %s: %s", ns, NamespaceResource(ns), d.Reason))
	case emptyList:
		writeJSON(w, http.StatusOK, RobotList{Robots: []*Robot{}})
	default:
		h.storeError(w, ns, chi.URLParam(r, "name"), ErrRobotNotFound)
	}
	return false
}

// storeError answers an error of the store about robot ns+name.
func (h *robotsHandler) storeError(w http.ResponseWriter, ns, name string, err error) {
	if errors.Is(err, ErrRobotNotFound) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no robot %s%s+%s", RobotUserPrefix, ns, name))
		return
	}
	writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error: the robot store failed")
}

// newSecret returns a new robot secret: SecretPrefix and 32 random bytes,
// base64url-encoded.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}
