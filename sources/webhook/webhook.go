// Package webhook receives the push and tag webhooks of GitHub and GitLab
// (and of anything that signs its deliveries the same way) at POST
// /api/v1/sources/webhook, and asks for a check, at once, of each tracked
// source the delivery is for and whose secret verifies it
// (docs/sources.md#webhooks).
//
// A delivery is for the git sources whose URL, normalized, is one of the
// repository URLs of its payload (GitHub's repository.clone_url and
// html_url, GitLab's project.git_http_url and web_url), or, with the query
// parameter source=NAMESPACE/PACKAGE, for that one source of any kind. It
// is verified by GitHub's X-Hub-Signature-256 (sha256=HMAC-SHA256 of the
// body, in hex) or GitLab's X-Gitlab-Token (the secret itself), against the
// secret in each such source's webhookSecretFile, read at each delivery.
// Only the sources a delivery is for are tried, so that a delivery costs at
// most one HMAC per matching source. Only events that move refs (push, tag)
// ask for checks.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/config"
)

// Bounds of a delivery.
const (
	// MaxBody is the largest body a delivery may have; a larger one is
	// answered 413.
	MaxBody = 1 << 20
	// maxSecret is the largest webhook secret file read.
	maxSecret = 4 << 10
)

// Headers of the deliveries.
const (
	headerGitHubEvent     = "X-GitHub-Event"
	headerGitHubSignature = "X-Hub-Signature-256"
	headerGitHubDelivery  = "X-GitHub-Delivery"
	headerGitLabEvent     = "X-Gitlab-Event"
	headerGitLabToken     = "X-Gitlab-Token"
)

// checkEvents are the events that move refs and so ask for checks:
// GitHub's push (of a branch or a tag) and create (of a tag or a branch),
// GitLab's push and tag push. A delivery without an event header (a sender
// of its own, with ?source=) asks for them too; any other event, a ping
// among them, is answered 200 without a check.
var checkEvents = map[string]bool{
	"push": true, "create": true, // GitHub
	"Push Hook": true, "Tag Push Hook": true, // GitLab
}

// Result is the answer to a delivery that verified: how many sources it
// asked a check of.
type Result struct {
	Checked int `json:"checked"`
}

// handler serves the webhook.
type handler struct {
	// targets are the sources of the configuration, in its order.
	targets []target
	// check asks for a check of a source now (sources.Tracker.Check).
	check func(ctx context.Context, namespace, pkg string) error
	log   *slog.Logger
}

// New returns the webhook's handler: it answers a ping, or another event
// that moves no ref, 200 without a check, a delivery that
// some source it is for verifies 202 with a Result, and otherwise 400 (a
// malformed delivery, saying what is wrong), 401 (no source verifies it,
// without saying which sources exist), 405 (not a POST) or 413 (a body over
// MaxBody), each with an apiv1.Errors document. cfg lists the sources,
// whose URLs are normalized once, here; a nil log means slog.Default().
func New(cfg *config.Config, check func(ctx context.Context, namespace, pkg string) error, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	h := &handler{check: check, log: log}
	for _, ts := range cfg.TrackedSources() {
		h.targets = append(h.targets, target{namespace: ts.Namespace, source: ts.Source, url: NormalizeURL(ts.URL)})
	}
	return h
}

// deliveryError is a delivery refused with status; its message is the
// client's.
type deliveryError struct {
	status  int
	code    string
	message string
}

func (e *deliveryError) Error() string { return e.message }

func refuse(status int, code, format string, args ...any) error {
	return &deliveryError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// errUnverified answers a delivery no source verifies, in the same words
// whatever the reason, so that it tells nothing of the sources configured.
var errUnverified = refuse(http.StatusUnauthorized, "UNAUTHORIZED",
	"no source verifies this delivery: its repository or ?source= names no source with a webhookSecretFile, or the signature (X-Hub-Signature-256) or token (X-Gitlab-Token) does not match that secret")

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := h.serve(r)
	if err != nil {
		var de *deliveryError
		if !errors.As(err, &de) {
			h.log.ErrorContext(r.Context(), "sources webhook: delivery failed", "delivery", r.Header.Get(headerGitHubDelivery), "err", err)
			de = &deliveryError{status: http.StatusInternalServerError, code: "INTERNAL", message: "internal error; the server logged the details"}
		}
		if de.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", http.MethodPost)
		}
		writeJSON(w, de.status, apiv1.Errors{Errors: []apiv1.Error{{Code: de.code, Message: de.message}}})
		return
	}
	status := http.StatusAccepted
	if res == nil {
		status, res = http.StatusOK, &Result{}
	}
	writeJSON(w, status, res)
}

// serve handles one delivery; a nil Result with a nil error is an event
// that asks for no check.
func (h *handler) serve(r *http.Request) (*Result, error) {
	if r.Method != http.MethodPost {
		return nil, refuse(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "%s %s: the webhook takes POST only", r.Method, r.URL.Path)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "INVALID", "read the body: %v", err)
	}
	if len(body) > MaxBody {
		return nil, refuse(http.StatusRequestEntityTooLarge, "TOO_LARGE", "the body is over %d bytes, the most a delivery may have", MaxBody)
	}
	event := r.Header.Get(headerGitHubEvent)
	if event == "" {
		event = r.Header.Get(headerGitLabEvent)
	}
	if event != "" && !checkEvents[event] {
		return nil, nil // a ping, or an event that moves no ref
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "INVALID", "the query string does not parse: %v", err)
	}
	for k := range q {
		if k != "source" {
			return nil, refuse(http.StatusBadRequest, "INVALID", "unknown query parameter %q; the webhook takes source=NAMESPACE/PACKAGE only", k)
		}
	}
	var candidates []target
	if q.Has("source") {
		candidates, err = h.named(q.Get("source"))
	} else {
		candidates, err = h.forPayload(r.Header.Get("Content-Type"), body)
	}
	if err != nil {
		return nil, err
	}
	verified := verifiedBy(candidates, r.Header, body, h.log.With("delivery", r.Header.Get(headerGitHubDelivery)))
	if len(verified) == 0 {
		return nil, errUnverified
	}
	res := &Result{}
	var failed error
	for _, t := range verified {
		if err := h.check(r.Context(), t.namespace, t.source.Package); err != nil {
			failed = fmt.Errorf("ask for a check of %s/%s: %w", t.namespace, t.source.Package, err)
			h.log.ErrorContext(r.Context(), "sources webhook: check not asked", "namespace", t.namespace, "package", t.source.Package, "err", err)
			continue
		}
		res.Checked++
	}
	if res.Checked == 0 {
		return nil, failed
	}
	h.log.InfoContext(r.Context(), "sources webhook: checks asked", "event", event, "delivery", r.Header.Get(headerGitHubDelivery), "checked", res.Checked)
	return res, nil
}

// target is a source a delivery may be for.
type target struct {
	namespace string
	source    config.Source
	// url is the source's URL, normalized (NormalizeURL).
	url string
}

// named returns the source ?source=NAMESPACE/PACKAGE names, of any kind;
// none when there is no such source.
func (h *handler) named(name string) ([]target, error) {
	ns, pkg, ok := strings.Cut(name, "/")
	if !ok || ns == "" || pkg == "" || strings.Contains(pkg, "/") {
		return nil, refuse(http.StatusBadRequest, "INVALID", "query parameter source=%q: want NAMESPACE/PACKAGE", name)
	}
	var out []target
	for _, t := range h.targets {
		if t.namespace == ns && t.source.Package == pkg {
			out = append(out, t)
		}
	}
	return out, nil
}

// forPayload returns the git sources whose URL is one of the repository
// URLs of the payload.
func (h *handler) forPayload(contentType string, body []byte) ([]target, error) {
	urls, err := payloadURLs(contentType, body)
	if err != nil {
		return nil, err
	}
	var out []target
	for _, t := range h.targets {
		if t.source.Kind == "git" && urls[t.url] {
			out = append(out, t)
		}
	}
	return out, nil
}

// payload holds the repository URLs of GitHub's and GitLab's push and tag
// payloads.
type payload struct {
	Repository *struct {
		CloneURL string `json:"clone_url"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
	Project *struct {
		GitHTTPURL string `json:"git_http_url"`
		WebURL     string `json:"web_url"`
	} `json:"project"`
}

// payloadURLs returns the normalized repository URLs of a JSON payload, or
// of the payload field of a form-encoded one (GitHub's other content type).
func payloadURLs(contentType string, body []byte) (map[string]bool, error) {
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil || !form.Has("payload") {
			return nil, refuse(http.StatusBadRequest, "INVALID", "the form-encoded body has no payload field holding the JSON payload")
		}
		body = []byte(form.Get("payload"))
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, refuse(http.StatusBadRequest, "INVALID", "the payload is not a JSON object of a push or tag event: %v", err)
	}
	urls := map[string]bool{}
	add := func(ss ...string) {
		for _, s := range ss {
			if s != "" {
				urls[NormalizeURL(s)] = true
			}
		}
	}
	if p.Repository != nil {
		add(p.Repository.CloneURL, p.Repository.HTMLURL)
	}
	if p.Project != nil {
		add(p.Project.GitHTTPURL, p.Project.WebURL)
	}
	if len(urls) == 0 {
		return nil, refuse(http.StatusBadRequest, "INVALID",
			"the payload names no repository: it has none of repository.clone_url, repository.html_url (GitHub), project.git_http_url, project.web_url (GitLab); name the source with ?source=NAMESPACE/PACKAGE instead")
	}
	return urls, nil
}

// NormalizeURL is the form in which a source's URL and a payload's are
// compared: scheme and host lower-cased, without credentials, query,
// fragment, a trailing "/" or ".git".
func NormalizeURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return trimRepo(strings.TrimSpace(s))
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + trimRepo(u.EscapedPath())
}

func trimRepo(p string) string {
	p = strings.TrimRight(p, "/")
	return strings.TrimRight(strings.TrimSuffix(p, ".git"), "/")
}

// verifiedBy returns the candidates whose webhook secret verifies the
// delivery. A candidate without a secret file, or whose file cannot be
// read, verifies nothing.
func verifiedBy(candidates []target, hdr http.Header, body []byte, log *slog.Logger) []target {
	signature, hasSignature := strings.CutPrefix(hdr.Get(headerGitHubSignature), "sha256=")
	mac, err := hex.DecodeString(signature)
	hasSignature = hasSignature && err == nil && len(mac) == sha256.Size
	token := hdr.Get(headerGitLabToken)
	if !hasSignature && token == "" {
		return nil
	}
	var out []target
	for _, t := range candidates {
		if t.source.WebhookSecretFile == "" {
			continue
		}
		secret, err := readSecret(t.source.WebhookSecretFile)
		if err != nil {
			log.Error("sources webhook: read the webhook secret", "namespace", t.namespace, "package", t.source.Package, "err", err)
			continue
		}
		if hasSignature && verifySignature(secret, body, mac) || token != "" && verifyToken(secret, token) {
			out = append(out, t)
		}
	}
	return out
}

// readSecret reads a webhook secret file, without the white space around
// the secret (the newline an editor or kubectl leaves).
func readSecret(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(b) > maxSecret {
		return nil, fmt.Errorf("%s: over %d bytes; a webhook secret file holds the secret alone", file, maxSecret)
	}
	secret := []byte(strings.TrimSpace(string(b)))
	if len(secret) == 0 {
		return nil, fmt.Errorf("%s is empty", file)
	}
	return secret, nil
}

// verifySignature reports whether mac is the HMAC-SHA256 of body with
// secret, in constant time.
func verifySignature(secret, body, mac []byte) bool {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(m.Sum(nil), mac)
}

// verifyToken reports whether token is secret, in a time that depends on
// neither (their digests are compared).
func verifyToken(secret []byte, token string) bool {
	a, b := sha256.Sum256(secret), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v) // Result and apiv1.Errors always encode
	b = append(b, '\n')
	w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
