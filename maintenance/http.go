package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// GCPath is the path of the admin API's on-demand run.
const GCPath = "/api/v1/admin/gc"

// Handler serves POST GCPath[?dryRun=true|false]: one run of retention and
// garbage collection, answered with its Report when it ends (200). Without
// dryRun, the run deletes unless gc.dryRun is set. A run in progress in
// this process is answered 409 Conflict; one on another replica is waited
// for. The caller must be allowed to administer everything: wrap the
// handler in auth.AdminGate, inside auth.API.
func (m *Maintenance) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != GCPath {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "no endpoint "+r.URL.Path+"; the admin API has "+GCPath)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" "+GCPath+": only POST starts a run")
			return
		}
		dryRun, err := parseDryRun(r, m.opts.Config.GC.DryRun)
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID", err.Error())
			return
		}
		// The run goes on if the client hangs up: stopped half way, it
		// would leave its work for the next.
		rep, err := m.Run(context.WithoutCancel(r.Context()), dryRun, auth.IdentityFrom(r.Context()).Subject)
		switch {
		case errors.Is(err, ErrRunning):
			writeError(w, http.StatusConflict, "CONFLICT", err.Error()+" in this server; try again when it ends")
		case err != nil:
			writeError(w, http.StatusInternalServerError, "INTERNAL", "the run failed; the server logged why")
		default:
			writeJSON(w, http.StatusOK, rep)
		}
	})
}

// parseDryRun reads the request's dryRun parameter, def when it is absent;
// any other parameter is refused.
func parseDryRun(r *http.Request, def bool) (bool, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "dryRun" {
			return false, fmt.Errorf("unknown parameter %q: %s takes only dryRun=true|false", k, GCPath)
		}
	}
	v, ok := q["dryRun"]
	if !ok {
		return def, nil
	}
	if len(v) > 1 && slices.ContainsFunc(v, func(s string) bool { return s != v[0] }) {
		return false, fmt.Errorf("dryRun given %d times (%s): give it once", len(v), strings.Join(v, ", "))
	}
	b, err := strconv.ParseBool(v[0])
	if err != nil {
		return false, fmt.Errorf("dryRun=%q: want true or false", v[0])
	}
	return b, nil
}

// writeError writes one error as an apiv1.Errors document, the format of
// the catalog API's errors.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, apiv1.Errors{Errors: []apiv1.Error{{Code: code, Message: message}}})
}

// writeJSON writes v as a JSON document with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
