package ui

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/internal/forwarded"
)

// maxLoginForm bounds the body of a login form.
const maxLoginForm = 16 << 10

// loginPage is the data of the login page.
type loginPage struct {
	// Off is set when the registry has no logins.
	Off      bool
	Username string
	// Error says why the last attempt failed.
	Error string
}

func (loginPage) title() string { return "Sign in" }

// loginForm serves GET /ui/login.
func (h *handler) loginForm(w http.ResponseWriter, r *http.Request) error {
	h.render(w, r, http.StatusOK, "login", loginPage{Off: h.sessions == nil})
	return nil
}

// login serves POST /ui/login: it checks the user name and password as
// Basic credentials are checked, and on success sets the session cookie and
// sends the viewer to the search page. A failure shows the form again, with
// the user name but never the password.
func (h *handler) login(w http.ResponseWriter, r *http.Request) error {
	if h.sessions == nil {
		h.render(w, r, http.StatusNotFound, "login", loginPage{Off: true})
		return nil
	}
	if err := sameOrigin(r); err != nil {
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("the login form could not be read: %w", catalog.ErrInvalid)
	}
	user, password := r.PostForm.Get("username"), r.PostForm.Get("password")
	page := loginPage{Username: user}
	_, err := h.sessions.Login(w, r, user, password)
	var limited *auth.RateLimitedError
	switch {
	case err == nil:
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.RetryAfter.Seconds()))))
		page.Error = "Too many failed sign-ins. " + limited.Error() + "."
		h.render(w, r, http.StatusTooManyRequests, "login", page)
	case errors.Is(err, auth.ErrBadCredentials):
		page.Error = "Wrong user name or password (or a revoked or expired robot)."
		h.render(w, r, http.StatusUnauthorized, "login", page)
	default:
		return err
	}
	return nil
}

// logout serves POST /ui/logout: it ends the session (auth.Sessions.Logout
// revokes it on every replica) and clears the session cookie.
func (h *handler) logout(w http.ResponseWriter, r *http.Request) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	if h.sessions != nil {
		if err := h.sessions.Logout(w, r); err != nil {
			return err
		}
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// errCrossSite refuses a form posted from another site.
var errCrossSite = fmt.Errorf("the form was posted from another site: %w", catalog.ErrInvalid)

// sameOrigin refuses a form that another site posted: one whose Origin is
// not the host the request came to, or that the browser marks cross-site.
func sameOrigin(r *http.Request) error {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errCrossSite
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host && u.Host != httpapi.PullHost(forwarded.BaseURL(r, "")) {
			return errCrossSite
		}
	}
	return nil
}
