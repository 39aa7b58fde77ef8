package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/berth-registry/berth/config"
)

// Limits of fetching an issuer's key set.
const (
	// jwksRefetchInterval is the least time between two fetches of one
	// issuer's key set on unknown key IDs.
	jwksRefetchInterval = 30 * time.Second
	// jwksFetchTimeout bounds one fetch.
	jwksFetchTimeout = 10 * time.Second
	// jwksMaxBytes bounds a key set's size.
	jwksMaxBytes = 1 << 20
)

// oidcAlgorithms are the signature algorithms accepted from OIDC issuers:
// asymmetric ones only, never "none" nor HMAC.
var oidcAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// oidcIssuer verifies the JWTs of one trusted issuer and maps them to
// subjects.
type oidcIssuer struct {
	cfg    config.OIDCIssuer
	client *http.Client

	mu   sync.Mutex
	keys []jose.JSONWebKey

	// fetchMu serializes fetches; it guards lastFetch.
	fetchMu   sync.Mutex
	lastFetch time.Time
}

// newOIDCIssuer reads the issuer's key set from its file, or fetches it
// from its URL.
func newOIDCIssuer(ctx context.Context, cfg config.OIDCIssuer, client *http.Client, now time.Time) (*oidcIssuer, error) {
	o := &oidcIssuer{cfg: cfg, client: client}
	if cfg.JWKSFile != "" {
		data, err := os.ReadFile(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("jwksFile: %w", err)
		}
		keys, err := parseJWKS(data)
		if err != nil {
			return nil, fmt.Errorf("jwksFile: %s: %w", cfg.JWKSFile, err)
		}
		o.keys = keys
		return o, nil
	}
	if err := o.fetch(ctx, now); err != nil {
		return nil, fmt.Errorf("jwksURL: %w", err)
	}
	return o, nil
}

// parseJWKS returns the public signing keys of a JSON Web Key Set.
func parseJWKS(data []byte) ([]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		pub := k.Public()
		if k.Use == "enc" || !pub.Valid() {
			continue
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, errors.New("the key set holds no public signing key")
	}
	return keys, nil
}

// fetch gets the key set from the issuer's URL.
func (o *oidcIssuer) fetch(ctx context.Context, now time.Time) error {
	o.lastFetch = now
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.cfg.JWKSURL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", o.cfg.JWKSURL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", o.cfg.JWKSURL, err)
	}
	if len(data) > jwksMaxBytes {
		return fmt.Errorf("GET %s: the key set is larger than %d bytes", o.cfg.JWKSURL, jwksMaxBytes)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return fmt.Errorf("GET %s: %w", o.cfg.JWKSURL, err)
	}
	o.mu.Lock()
	o.keys = keys
	o.mu.Unlock()
	return nil
}

// keysFor returns the keys that may have signed a token whose header is h:
// the key of its kid (refetching the key set, at most once per
// jwksRefetchInterval, when the kid is unknown), or every key when it has
// none.
func (o *oidcIssuer) keysFor(ctx context.Context, h jose.Header, now time.Time) []jose.JSONWebKey {
	if h.KeyID == "" {
		return o.currentKeys()
	}
	if k := keyByID(o.currentKeys(), h.KeyID); k != nil || o.cfg.JWKSURL == "" {
		return k
	}
	o.fetchMu.Lock()
	defer o.fetchMu.Unlock()
	if k := keyByID(o.currentKeys(), h.KeyID); k != nil || now.Sub(o.lastFetch) < jwksRefetchInterval {
		return k
	}
	if err := o.fetch(ctx, now); err != nil {
		slog.Warn("auth: cannot refetch an OIDC issuer's key set", "issuer", o.cfg.Issuer, "err", err)
		return nil
	}
	return keyByID(o.currentKeys(), h.KeyID)
}

func (o *oidcIssuer) currentKeys() []jose.JSONWebKey {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.keys
}

func keyByID(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	for i := range keys {
		if keys[i].KeyID == kid {
			return keys[i : i+1]
		}
	}
	return nil
}

// authenticate verifies tok, a JWT of this issuer, and maps it to a
// subject. Its errors wrap ErrBadCredentials and never quote the token's
// claims.
func (o *oidcIssuer) authenticate(ctx context.Context, tok *jwt.JSONWebToken, now time.Time) (Identity, error) {
	if len(tok.Headers) != 1 {
		return Identity{}, fmt.Errorf("%w: want a token with one signature", ErrBadCredentials)
	}
	h := tok.Headers[0]
	var std jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range o.keysFor(ctx, h, now) {
		if k.Algorithm != "" && k.Algorithm != h.Algorithm {
			continue
		}
		if tok.Claims(k.Key, &std, &all) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, fmt.Errorf("%w: the token's signature does not verify with a key of its issuer", ErrBadCredentials)
	}
	if std.Expiry == nil {
		return Identity{}, fmt.Errorf("%w: the token has no expiry", ErrBadCredentials)
	}
	expected := jwt.Expected{Issuer: o.cfg.Issuer, AnyAudience: jwt.Audience{o.cfg.Audience}, Time: now}
	if err := std.ValidateWithLeeway(expected, tokenLeeway); err != nil {
		return Identity{}, fmt.Errorf("%w: %s", ErrBadCredentials, claimsProblem(err))
	}
	for _, s := range o.cfg.Subjects {
		if claimsMatch(s.Claims, all) {
			return Identity{Subject: "oidc:" + s.Name, Groups: s.Groups, Issuer: o.cfg.Issuer, Expires: std.Expiry.Time()}, nil
		}
	}
	return Identity{}, fmt.Errorf("%w: no subject mapping of the token's issuer matched the token", ErrBadCredentials)
}

// claimsMatch reports whether every glob of want matches the string value
// of its claim; a missing or non-string claim never matches.
func claimsMatch(want map[string]string, claims map[string]any) bool {
	for name, glob := range want {
		v, ok := claims[name].(string)
		if !ok {
			return false
		}
		if ok, _ := path.Match(glob, v); !ok {
			return false
		}
	}
	return true
}
