package auth

import (
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxTokenForm bounds the body of a POST to the token endpoint.
const maxTokenForm = 64 << 10

// tokenResponse is the token endpoint's answer. token and access_token are
// the same token: docker reads the first, OAuth2 clients (oras-go, helm)
// the second.
type tokenResponse struct {
	Token        string `json:"token"`
	AccessToken  string `json:"access_token"`
	ExpiresIn    int    `json:"expires_in"`
	IssuedAt     string `json:"issued_at"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// Handler serves the token endpoint of the token spec, GET and POST
// /auth/token, the revocation of refresh tokens, POST /auth/revoke, and the
// public key tokens are signed with, as a JSON Web Key Set at
// /auth/jwks.json.
func (a *Authn) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /auth/token", a.getToken)
	mux.HandleFunc("POST /auth/token", a.postToken)
	mux.HandleFunc("POST /auth/revoke", a.revokeToken)
	mux.HandleFunc("GET /auth/jwks.json", a.jwks)
	return mux
}

// getToken answers GET /auth/token?service=...&scope=...[&offline_token=true]
// with Basic credentials or none.
func (a *Authn) getToken(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	scopes, err := a.tokenRequest(q.Get("service"), q["scope"])
	if err != nil {
		writeTokenError(w, err)
		return
	}
	id, err := a.Authenticate(r)
	if err != nil {
		writeTokenError(w, err)
		return
	}
	a.respond(w, id, scopes, q.Get("offline_token") == "true")
}

// postToken answers the OAuth2 form: grant_type=password with username and
// password, or grant_type=refresh_token with refresh_token; service, scope
// (space-separated), client_id and access_type=offline for a refresh token.
func (a *Authn) postToken(w http.ResponseWriter, r *http.Request) {
	f, err := readTokenForm(w, r)
	if err != nil {
		writeTokenError(w, err)
		return
	}
	scopes, err := a.tokenRequest(f.Get("service"), f["scope"])
	if err != nil {
		writeTokenError(w, err)
		return
	}
	var id Identity
	offline := false
	switch gt := f.Get("grant_type"); gt {
	case "password":
		if f.Get("password") == "" {
			writeTokenError(w, badRequest("grant_type=password needs username and password"))
			return
		}
		id, err = a.login(r, f.Get("username"), f.Get("password"))
		offline = f.Get("access_type") == "offline"
	case "refresh_token":
		id, err = a.redeem(r, f.Get("refresh_token"))
	default:
		err = badRequest("unsupported grant_type %q: want password or refresh_token", gt)
	}
	if err != nil {
		writeTokenError(w, err)
		return
	}
	a.respond(w, id, scopes, offline)
}

// readTokenForm reads the form of a POST to the token endpoints.
func readTokenForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, badRequest("want a body of type application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenForm)
	if err := r.ParseForm(); err != nil {
		return nil, badRequest("cannot read the form: %v", err)
	}
	return r.PostForm, nil
}

// revokeToken answers POST /auth/revoke with token=<a refresh token or a UI
// session's token>, as RFC 7009 has it: from then on every replica refuses
// the token. Holding a token is the right to revoke it. A token that is not
// valid (expired, malformed, not berth's) has nothing to revoke and gets 200
// too; an access token gets 400, as it cannot be revoked: it expires within
// auth.tokenTTL.
func (a *Authn) revokeToken(w http.ResponseWriter, r *http.Request) {
	f, err := readTokenForm(w, r)
	if err != nil {
		writeTokenError(w, err)
		return
	}
	raw := f.Get("token")
	if raw == "" {
		writeTokenError(w, badRequest("token is required: the refresh token to revoke"))
		return
	}
	now := a.now()
	if c, err := a.key.signed(raw, now); err == nil {
		if c.Use == useAccess {
			writeTokenError(w, badRequest("an access token cannot be revoked: it expires within %s (auth.tokenTTL)", a.cfg.TokenTTL))
			return
		}
		if c, err := a.key.verify(raw, a.cfg.Service, c.Use, now); err == nil {
			if err := a.revoke(r.Context(), c); err != nil {
				writeTokenError(w, err)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("{}\n"))
}

// tokenRequest checks the service a token is asked for and parses the
// scopes asked.
func (a *Authn) tokenRequest(service string, scopeValues []string) ([]scope, error) {
	if service != "" && service != a.cfg.Service {
		return nil, badRequest("unknown service %q: this registry's token service is %q", service, a.cfg.Service)
	}
	return parseScopes(scopeValues)
}

// redeem is the identity of a refresh token's subject, checked again.
func (a *Authn) redeem(r *http.Request, raw string) (Identity, error) {
	if raw == "" {
		return Identity{}, badRequest("grant_type=refresh_token needs refresh_token")
	}
	now := a.now()
	c, err := a.key.verify(raw, a.cfg.Service, useRefresh, now)
	if err != nil {
		return Identity{}, a.failed(r, "", reasonBadToken, err)
	}
	if err := a.checkRevoked(r.Context(), c); err != nil {
		if errors.Is(err, ErrBadCredentials) {
			return Identity{}, a.failed(r, c.Subject, reasonBadToken, err)
		}
		return Identity{}, err
	}
	id, err := a.resolve(r.Context(), c, now)
	if err != nil && errors.Is(err, ErrBadCredentials) {
		return Identity{}, a.failed(r, c.Subject, reasonOf(err), err)
	}
	return id, err
}

// respond issues id a token for what scopes ask and it may do, with a
// refresh token when offline (never to anonymous callers, nor to callers
// holding a token themselves).
func (a *Authn) respond(w http.ResponseWriter, id Identity, scopes []scope, offline bool) {
	now := a.now()
	tok, exp, err := a.issue(id, a.grant(id, scopes), now)
	if err != nil {
		writeTokenError(w, err)
		return
	}
	resp := tokenResponse{
		Token:       tok,
		AccessToken: tok,
		ExpiresIn:   int(exp.Sub(now).Seconds()),
		IssuedAt:    now.UTC().Format(time.RFC3339),
	}
	if offline && !id.IsAnonymous() && !id.Limited {
		if resp.RefreshToken, err = a.issueRefresh(id, now); err != nil {
			writeTokenError(w, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(resp)
}

// jwks serves the public key tokens are signed with.
func (a *Authn) jwks(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Write(a.key.jwks)
}

// writeTokenError answers err: 400 for a bad request, 401 with a Basic
// challenge for bad credentials, 429 with Retry-After when rate-limited,
// 500 otherwise (logged, not shown).
func writeTokenError(w http.ResponseWriter, err error) {
	var rl *RateLimitedError
	var bad *requestError
	status, code, msg := http.StatusInternalServerError, "UNKNOWN", "internal error"
	switch {
	case errors.As(err, &rl):
		status, code, msg = http.StatusTooManyRequests, "TOOMANYREQUESTS", err.Error()
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rl.RetryAfter.Seconds()))))
	case errors.As(err, &bad):
		status, code, msg = http.StatusBadRequest, "UNSUPPORTED", err.Error()
	case errors.Is(err, ErrBadCredentials):
		status, code, msg = http.StatusUnauthorized, "UNAUTHORIZED", err.Error()
		w.Header().Set("WWW-Authenticate", `Basic realm="berth"`)
	default:
		slog.Error("auth: token endpoint", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}
