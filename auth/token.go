package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// tokenLeeway is how far clocks may disagree when a token's exp, nbf and
// iat are checked.
const tokenLeeway = 30 * time.Second

// refreshTTL is how long a refresh token lives.
const refreshTTL = 24 * time.Hour

// The kinds of token berth issues, in their berth_use claim. None is ever
// accepted as another.
const (
	useAccess  = "access"
	useRefresh = "refresh"
	useSession = "session" // the web UI's session cookie (Sessions)
)

// tokenClaims are the claims of a token berth issues.
type tokenClaims struct {
	jwt.Claims
	// Access is the token spec's access claim; only access tokens have it.
	Access []Grant `json:"access,omitzero"`
	// Use is useAccess, useRefresh or useSession.
	Use string `json:"berth_use"`
	// OIDCIssuer is the OIDC issuer that vouched for an oidc subject
	// (Identity.Issuer).
	OIDCIssuer string `json:"berth_oidc_iss,omitempty"`
	// Password is the fingerprint of an htpasswd user's password
	// (Identity.password).
	Password string `json:"berth_pw,omitempty"`
}

// signingKey is the key berth signs its tokens with.
type signingKey struct {
	private *ecdsa.PrivateKey
	kid     string
	signer  jose.Signer
	// jwks is the JSON Web Key Set of the public key, as served.
	jwks []byte
	// fingerprintKey keys fingerprint; derived from the private key.
	fingerprintKey []byte
	// uploads bind upload sessions to their subjects (Authn.BindUpload),
	// under a key derived from the private key with another label.
	uploads keyBinder
	// verified holds the claims of tokens whose signature was checked, by
	// the token's SHA-256, so that a client's requests with one token cost
	// one ECDSA verification, not one each. Bounded by maxVerified.
	verifiedMu sync.Mutex
	verified   map[[sha256.Size]byte]*tokenClaims
}

// maxVerified bounds the verified-token cache; a full cache drops the
// tokens that expired, and all of them when none has.
const maxVerified = 10000

// loadSigningKey reads the ECDSA P-256 key of file, creating it first when
// there is none.
func loadSigningKey(file string) (*signingKey, error) {
	key, err := readSigningKey(file)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createSigningKey(file)
	}
	if err != nil {
		return nil, err
	}
	return newSigningKey(key)
}

func readSigningKey(file string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", file)
	}
	var parsed any
	switch block.Type {
	case "EC PRIVATE KEY":
		parsed, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		parsed, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s: want an EC PRIVATE KEY or PRIVATE KEY PEM block (got %q)", file, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: want an ECDSA P-256 key", file)
	}
	return key, nil
}

// createSigningKey writes a new key to file (its directory mode 0700, the
// file 0600). The key is written to a temporary file first and linked into
// place, which fails when the file exists: when another process created the
// key meanwhile, that key is read and used.
func createSigningKey(file string) (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".token-key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), file); errors.Is(err, fs.ErrExist) {
		return readSigningKey(file)
	} else if err != nil {
		return nil, err
	}
	return key, nil
}

func newSigningKey(key *ecdsa.PrivateKey) (*signingKey, error) {
	pub := jose.JSONWebKey{Key: &key.PublicKey, Algorithm: string(jose.ES256), Use: "sig"}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	pub.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), pub.KeyID))
	if err != nil {
		return nil, err
	}
	scalar, err := key.Bytes()
	if err != nil {
		return nil, err
	}
	// derive is a key for one use, named by label: knowing it tells
	// nothing of the private key or of the keys of other labels.
	derive := func(label string) []byte {
		sum := sha256.Sum256(append([]byte(label+"\x00"), scalar...))
		return sum[:]
	}
	return &signingKey{private: key, kid: pub.KeyID, signer: signer, jwks: jwks,
		fingerprintKey: derive("berth token fingerprint"), uploads: derive("berth upload owner")}, nil
}

// sign issues a token of use for id, from now until exp, with an access
// claim for access tokens.
func (k *signingKey) sign(service string, id Identity, use string, grants []Grant, now, exp time.Time) (string, error) {
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	c := tokenClaims{
		Claims: jwt.Claims{
			Issuer:    service,
			Audience:  jwt.Audience{service},
			Subject:   tokenSubject(id),
			Expiry:    jwt.NewNumericDate(exp),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        hex.EncodeToString(jti),
		},
		Use:        use,
		OIDCIssuer: id.Issuer,
		Password:   id.password,
	}
	if use == useAccess {
		c.Access = grants
		if c.Access == nil {
			c.Access = []Grant{}
		}
	}
	return jwt.Signed(k.signer).Claims(c).Serialize()
}

// fingerprint is a short keyed digest of data that tokens may carry in the
// clear: an HMAC-SHA256 under a key derived from the signing key, so that
// every replica computes the same, and no one without the key can.
func (k *signingKey) fingerprint(data []byte) string {
	mac := hmac.New(sha256.New, k.fingerprintKey)
	mac.Write(data)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// verify checks that raw is a token of use that k signed for service, valid
// at now, and returns its claims. Its errors wrap ErrBadCredentials.
func (k *signingKey) verify(raw, service, use string, now time.Time) (*tokenClaims, error) {
	c, err := k.signed(raw, now)
	if err != nil {
		return nil, err
	}
	if c.Expiry == nil {
		return nil, fmt.Errorf("%w: the token has no expiry", ErrBadCredentials)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: service, AnyAudience: jwt.Audience{service}, Time: now}, tokenLeeway); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadCredentials, claimsProblem(err))
	}
	if c.Use != use {
		return nil, fmt.Errorf("%w: the token is of kind %q, not %q", ErrBadCredentials, c.Use, use)
	}
	return c, nil
}

// verifiedBefore reports whether raw is a token whose signature k checked
// before: a request bearing it needs no parsing to know its issuer.
func (k *signingKey) verifiedBefore(raw string) bool {
	sum := sha256.Sum256([]byte(raw))
	k.verifiedMu.Lock()
	defer k.verifiedMu.Unlock()
	_, ok := k.verified[sum]
	return ok
}

// signed returns the claims of raw once its signature is checked, from the
// cache of verified tokens when raw was checked before.
func (k *signingKey) signed(raw string, now time.Time) (*tokenClaims, error) {
	sum := sha256.Sum256([]byte(raw))
	k.verifiedMu.Lock()
	c, ok := k.verified[sum]
	k.verifiedMu.Unlock()
	if ok {
		return c, nil
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, fmt.Errorf("%w: malformed token", ErrBadCredentials)
	}
	c = &tokenClaims{}
	if err := tok.Claims(&k.private.PublicKey, c); err != nil {
		return nil, fmt.Errorf("%w: the token is not signed by this registry", ErrBadCredentials)
	}
	k.verifiedMu.Lock()
	defer k.verifiedMu.Unlock()
	if k.verified == nil {
		k.verified = map[[sha256.Size]byte]*tokenClaims{}
	}
	if len(k.verified) >= maxVerified {
		for key, v := range k.verified {
			if v.Expiry == nil || !v.Expiry.Time().After(now) {
				delete(k.verified, key)
			}
		}
		if len(k.verified) >= maxVerified {
			clear(k.verified)
		}
	}
	k.verified[sum] = c
	return c, nil
}

// claimsProblem says in words what jwt.Claims.ValidateWithLeeway refused.
func claimsProblem(err error) string {
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return "the token is from another issuer"
	case errors.Is(err, jwt.ErrInvalidAudience):
		return "the token is for another audience"
	}
	return "the token's claims are invalid"
}
