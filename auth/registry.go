package auth

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/distribution/distribution/v3/registry/api/errcode"

	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/registry"
)

// RegistryOptions configure the enforcement of access decisions on the OCI
// API under /v2/.
type RegistryOptions struct {
	// Authenticator establishes who each request comes from; required when
	// Policy is set.
	Authenticator Authenticator
	// Policy decides; nil is berth without auth, which allows everything.
	Policy *Policy
	// Service is the service name of the token spec, as challenges name it.
	Service string
	// Realm is the URL of the token endpoint that challenges send clients
	// to; "" derives it from the request: scheme://Host/auth/token.
	Realm string
	// Audit receives every denied decision and every write.
	Audit *Auditor
	// Metrics count the decisions.
	Metrics *Metrics
	// Uploads bind upload sessions to the subjects that opened them;
	// every replica must have the same (an Authn with the same key file).
	// nil binds with a random key of this process: an upload must then be
	// finished on the process that opened it.
	Uploads UploadBinder
}

// Registry enforces the policy on next, the handler of the OCI API under
// /v2/. Every request is authenticated and its identity put in its context
// (WithIdentity). A request is then allowed only when the policy allows the
// action its route needs on its repository; what a caller may not pull
// answers exactly as what does not exist does, since the answer depends on
// the name the request used and never on what is stored:
//
//   - an anonymous caller, or one whose token lacks a grant a new token
//     would get, is challenged (401, WWW-Authenticate: Bearer with the
//     scope to ask for);
//   - a caller who logged in and whom the policy denies gets 403 DENIED.
//
// GET /v2/ and paths that name no endpoint need a caller who logged in.
// /v2/_catalog lists only the repositories the caller may pull (a token must
// grant registry:catalog:*). A cross-repository blob mount from a repository
// the caller may not pull becomes a plain upload; an upload session answers
// only the subject that opened it, which its URL binds it to
// (UploadOwnerParam). A subject who may sign but not push a repository may
// push only signatures and referrers there
// (registry.WithSignOnly). A namespace's OLM catalog, which berth
// generates, can be pulled only by who may pull every package of the
// namespace, and written by no one: 403 DENIED, even to an anonymous
// caller (Policy.Decide, registry.ReservedWrite). Denials and successful
// writes are audited.
//
// With a nil Policy (auth off) Registry returns next unchanged.
func Registry(next http.Handler, opts RegistryOptions) http.Handler {
	if opts.Policy == nil {
		return next
	}
	if opts.Authenticator == nil {
		panic("auth.Registry: a Policy without an Authenticator")
	}
	g := &registryGate{next: next, opts: opts, uploads: opts.Uploads}
	if g.uploads == nil {
		g.uploads = processBinder()
	}
	return g
}

// registryGate is the handler Registry returns.
type registryGate struct {
	next    http.Handler
	opts    RegistryOptions
	uploads UploadBinder
}

// need is what a request on a repository requires.
type need struct {
	action Action
	// signs: Sign suffices when Push is denied.
	signs bool
}

// needOf is what a request with method on a route of kind requires:
// reads pull; uploads push or sign; manifest PUTs push, or sign for
// signatures and referrers; deletes delete. Methods the endpoint does not
// serve need push, the strictest write, so that their refusal says nothing.
func needOf(kind registry.RouteKind, method string) need {
	read := method == http.MethodGet || method == http.MethodHead
	switch kind {
	case registry.RouteTags, registry.RouteReferrers:
		return need{action: Pull}
	case registry.RouteUploadStart, registry.RouteUpload:
		return need{action: Push, signs: true}
	case registry.RouteManifest, registry.RouteBlob:
		switch {
		case read:
			return need{action: Pull}
		case method == http.MethodDelete:
			return need{action: Delete}
		case method == http.MethodPut && kind == registry.RouteManifest:
			return need{action: Push, signs: true}
		}
	}
	return need{action: Push}
}

// scopeActions are the actions of the token scope a challenge asks for.
func (n need) scopeActions() string {
	switch n.action {
	case Pull:
		return "pull"
	case Delete:
		return "delete"
	}
	return "pull,push"
}

func (g *registryGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := registry.ParseRoute(r)
	id, err := g.opts.Authenticator.Authenticate(r)
	if err != nil {
		g.authenticationFailed(w, r, route, err)
		return
	}
	r = r.WithContext(WithIdentity(r.Context(), id))
	switch route.Kind {
	case registry.RouteUnknown, registry.RouteBase:
		if id.IsAnonymous() && !id.Limited {
			g.challenge(w, r, "", false, "authentication required")
			return
		}
		g.next.ServeHTTP(w, r)
	case registry.RouteCatalog:
		g.serveCatalog(w, r, id)
	default:
		g.serveRepository(w, r, id.withoutCatalogGrant(), route)
	}
}

// authenticationFailed answers a request whose credentials were refused.
func (g *registryGate) authenticationFailed(w http.ResponseWriter, r *http.Request, route registry.Route, err error) {
	var limited *RateLimitedError
	switch {
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.RetryAfter.Seconds()))))
		serveError(w, errcode.ErrorCodeTooManyRequests.WithMessage(limited.Error()))
	case errors.Is(err, ErrBadCredentials):
		g.challenge(w, r, scopeOf(route, r.Method), false, "invalid credentials")
	default:
		serveError(w, errcode.ErrorCodeUnknown.WithMessage("authentication failed"))
	}
}

// scopeOf is the token scope that a request on route needs.
func scopeOf(route registry.Route, method string) string {
	switch route.Kind {
	case registry.RouteUnknown, registry.RouteBase:
		return ""
	case registry.RouteCatalog:
		return catalogScope
	}
	return "repository:" + route.Repository + ":" + needOf(route.Kind, method).scopeActions()
}

// catalogScope is the token scope of /v2/_catalog.
const catalogScope = "registry:catalog:*"

// serveCatalog lets a caller list the repositories it may pull: with a
// token, one that grants the catalog scope (anonymous callers get one too,
// and see what anonymous may pull); without, only after logging in.
func (g *registryGate) serveCatalog(w http.ResponseWriter, r *http.Request, id Identity) {
	if id.Limited && !id.grantsCatalog() || !id.Limited && id.IsAnonymous() {
		reason := "listing the catalog needs a login"
		if id.Limited {
			reason = "the token does not grant " + catalogScope
		}
		g.opts.Metrics.Decision(Pull, false)
		g.opts.Audit.Record(r, Event{Subject: id.Name(), Action: string(Pull), Resource: catalogScope, Result: ResultDenied, Reason: reason})
		g.challenge(w, r, catalogScope, id.Limited, reason)
		return
	}
	keep := func(repo string) bool {
		allowed := g.opts.Policy.Allowed(id, repo, Pull)
		g.opts.Metrics.Decision(Pull, allowed)
		return allowed
	}
	g.next.ServeHTTP(w, r.WithContext(registry.WithRepositoryFilter(r.Context(), keep)))
}

// serveRepository serves a request on a repository when the policy allows it.
func (g *registryGate) serveRepository(w http.ResponseWriter, r *http.Request, id Identity, route registry.Route) {
	n := needOf(route.Kind, r.Method)
	d, action := g.decide(id, route.Repository, n)
	g.opts.Metrics.Decision(action, d.Allowed)
	if !d.Allowed {
		g.opts.Audit.Record(r, Event{Subject: id.Name(), Action: string(action), Resource: route.Repository, Result: ResultDenied, Reason: d.Reason})
		g.deny(w, r, id, route, n)
		return
	}
	signOnly := action == Sign && route.Kind == registry.RouteManifest
	if signOnly {
		r = r.WithContext(registry.WithSignOnly(r.Context()))
	}
	switch route.Kind {
	case registry.RouteUploadStart:
		g.serveUploadStart(w, r, id, route)
	case registry.RouteUpload:
		g.serveUpload(w, r, id, route)
	case registry.RouteManifest, registry.RouteBlob:
		sw := &statusWriter{ResponseWriter: w}
		g.next.ServeHTTP(sw, r)
		g.auditWrite(r, id, route, sw, signOnly)
	default:
		g.next.ServeHTTP(w, r)
	}
}

// decide is the policy's decision on id doing n on repo, with the action it
// decided: Push, or Sign when Push is denied and Sign suffices and is allowed.
func (g *registryGate) decide(id Identity, repo string, n need) (Decision, Action) {
	d := g.opts.Policy.Decide(id, repo, n.action)
	if d.Allowed || !n.signs {
		return d, n.action
	}
	if s := g.opts.Policy.Decide(id, repo, Sign); s.Allowed {
		return s, Sign
	}
	return d, n.action
}

// deny answers a denied request: a challenge when logging in or a new token
// could help, else 403. A write into a namespace's OLM catalog, which no
// login or token can help, gets the registry's own refusal
// (registry.ReservedWrite).
func (g *registryGate) deny(w http.ResponseWriter, r *http.Request, id Identity, route registry.Route, n need) {
	if err := registry.ReservedWrite(route, r.Method); err != nil {
		serveError(w, err)
		return
	}
	scope := scopeOf(route, r.Method)
	if id.IsAnonymous() {
		g.challenge(w, r, scope, id.Limited, "authentication required")
		return
	}
	if id.Limited {
		unlimited := id
		unlimited.Limited, unlimited.Grants = false, nil
		if d, _ := g.decide(unlimited, route.Repository, n); d.Allowed {
			g.challenge(w, r, scope, true, "the token does not grant "+scope)
			return
		}
	}
	verb := map[Action]string{Pull: "pull from", Push: "push to", Delete: "delete from"}[n.action]
	serveError(w, errcode.ErrorCodeDenied.WithMessage(fmt.Sprintf("%s may not %s repository %s", id.Subject, verb, route.Repository)))
}

// challenge answers 401 with the Bearer challenge of the token spec for
// scope ("" for none); insufficient adds error="insufficient_scope", for a
// request that presented a token.
func (g *registryGate) challenge(w http.ResponseWriter, r *http.Request, scope string, insufficient bool, message string) {
	c := fmt.Sprintf("Bearer realm=%q,service=%q", g.realm(r), g.opts.Service)
	if scope != "" {
		c += fmt.Sprintf(",scope=%q", scope)
	}
	if insufficient {
		c += `,error="insufficient_scope"`
	}
	w.Header().Set("WWW-Authenticate", c)
	serveError(w, errcode.ErrorCodeUnauthorized.WithMessage(message))
}

// realm is the configured realm, or the token endpoint under the external
// base URL of the request (forwarded.BaseURL).
func (g *registryGate) realm(r *http.Request) string {
	if g.opts.Realm != "" {
		return g.opts.Realm
	}
	return forwarded.BaseURL(r, "") + "/auth/token"
}

// serveError answers with an OCI error, as distribution does.
func serveError(w http.ResponseWriter, err error) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	_ = errcode.ServeJSON(w, err)
}

// auditWrite records a successful manifest push, signature push or delete,
// and a sign-only push the registry guard refused.
func (g *registryGate) auditWrite(r *http.Request, id Identity, route registry.Route, sw *statusWriter, signOnly bool) {
	if signOnly && sw.status == http.StatusForbidden {
		g.opts.Audit.Record(r, Event{Subject: id.Name(), Action: string(Push), Resource: route.Repository + ":" + route.Reference, Result: ResultDenied,
			Reason: "allowed to sign, not to push: only signatures and referrers, never a package version or another tag"})
		return
	}
	if sw.status < 200 || sw.status > 299 {
		return
	}
	ok := func(action, resource string) {
		g.opts.Audit.Record(r, Event{Subject: id.Name(), Action: action, Resource: resource, Result: ResultOK})
	}
	byDigest := strings.Contains(route.Reference, ":")
	switch {
	case r.Method == http.MethodDelete && byDigest:
		ok("delete", route.Repository+"@"+route.Reference)
	case r.Method == http.MethodDelete:
		ok("delete", route.Repository+":"+route.Reference)
	case r.Method == http.MethodPut && route.Kind == registry.RouteManifest:
		action := string(Push)
		if signOnly {
			action = string(Sign)
		}
		ok(action, route.Repository+"@"+sw.Header().Get("Docker-Content-Digest"))
		if !byDigest {
			ok("tag", route.Repository+":"+route.Reference)
		}
	}
}

// statusWriter remembers the status of the response it writes, and calls
// onStatus with it before the header goes out.
type statusWriter struct {
	http.ResponseWriter
	status   int
	onStatus func(status int, h http.Header)
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
		if w.onStatus != nil {
			w.onStatus(status, w.Header())
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends what has been written.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
