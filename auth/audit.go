package auth

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"
	"unicode/utf8"

	"github.com/berth-registry/berth/internal/forwarded"
)

// Audit event results.
const (
	// ResultDenied: an access decision refused the request.
	ResultDenied = "denied"
	// ResultOK: a write succeeded.
	ResultOK = "ok"
	// ResultFailed: a login failed.
	ResultFailed = "failed"
)

// Event is one audit event: a denied decision, a failed login or a write
// (push, tag, delete, robot create and revoke, promote).
type Event struct {
	// Subject is who acted ("anonymous", "user:alice", ...).
	Subject string
	// Action is what was done or asked: pull, push, tag, delete, sign,
	// admin, login, robot.create, robot.revoke.
	Action string
	// Resource is what it was done to: a repository, repo:tag, repo@digest,
	// or a robot's user name.
	Resource string
	// Result is ResultDenied, ResultOK or ResultFailed.
	Result string
	// Reason says why, for denials and failures.
	Reason string
}

// Auditor writes audit events as JSON lines to a destination of their own.
// A nil *Auditor records nothing.
type Auditor struct {
	log *slog.Logger
}

// NewAuditor writes events to w.
func NewAuditor(w io.Writer) *Auditor {
	return &Auditor{log: slog.New(slog.NewJSONHandler(w, nil))}
}

// OpenAuditor opens dest: "stderr", "stdout" or a file, appended to
// (created with mode 0600) and rotated as rot says. The closer closes the
// file.
func OpenAuditor(dest string, rot Rotation) (*Auditor, io.Closer, error) {
	switch dest {
	case "stderr":
		return NewAuditor(os.Stderr), io.NopCloser(nil), nil
	case "stdout":
		return NewAuditor(os.Stdout), io.NopCloser(nil), nil
	}
	f, err := openRotating(dest, rot)
	if err != nil {
		return nil, nil, err
	}
	return NewAuditor(f), f, nil
}

// maxField bounds each string of an event in bytes, so that one event,
// however long the request's path, stays far below config.MinAuditSize
// and a rotated file holds it whole.
const maxField = 4096

// clip cuts s to maxField bytes, on a character boundary, marking the cut.
func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	cut := maxField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(clipped)"
}

// Record writes e, with the request's ID, client address, method and path.
func (a *Auditor) Record(r *http.Request, e Event) {
	if a == nil {
		return
	}
	// Room for every attribute: the event's, the request's and the time.
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("subject", clip(e.Subject)),
		slog.String("action", e.Action),
		slog.String("resource", clip(e.Resource)),
		slog.String("result", e.Result))
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", clip(e.Reason)))
	}
	ctx := context.Background()
	if r != nil {
		ctx = r.Context()
		attrs = append(attrs,
			slog.String("request_id", clip(r.Header.Get("X-Request-Id"))),
			slog.String("client", ClientIP(r)),
			slog.String("method", clip(r.Method)),
			slog.String("path", clip(r.URL.Path)))
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "audit", append(attrs, slog.Time("at", time.Now().UTC()))...)
}

// ClientIP is the address of the client that sent the request, without its
// port: its peer's, or the one a trusted proxy forwarded (forwarded.Of).
func ClientIP(r *http.Request) string {
	return forwarded.Of(r).Client
}
