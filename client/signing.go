package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/signing"
)

// ErrUnverified: a trust policy requires a verified signature of the
// version and none verifies.
var ErrUnverified = errors.New("not verified")

// Resolve returns the descriptor of the manifest ref names, by digest when
// ref has one, else by tag. Errors wrap ErrInvalidReference (neither
// version nor digest), ErrNotFound, ErrUnauthorized, ErrDenied or
// ErrRegistry.
func (c *Client) Resolve(ctx context.Context, ref Reference) (ocispec.Descriptor, error) {
	return c.resolve(ctx, "resolve", ref)
}

// resolve is Resolve with errors naming op.
func (c *Client) resolve(ctx context.Context, op string, ref Reference) (ocispec.Descriptor, error) {
	if ref.Tag == "" && ref.Digest == "" {
		return ocispec.Descriptor{}, fmt.Errorf("%s %s: %w: give a version (name:version) or a digest (name@sha256:...)", op, ref, ErrInvalidReference)
	}
	desc, err := c.repository(ref).Resolve(ctx, ref.manifestReference())
	if err != nil {
		return ocispec.Descriptor{}, wrapError(op, ref, "", err)
	}
	return desc, nil
}

// Fetcher returns a signing.Fetcher that reads the repositories of the
// registry host[:port] with the client's credentials and HTTP rules, for
// signing.Check. Its errors for missing tags, manifests and blobs wrap
// signing.ErrNotFound; a repository without referrers, or unknown to the
// registry, has none.
func (c *Client) Fetcher(registryHost string) signing.Fetcher {
	return &fetcher{c: c, registry: registryHost}
}

// fetcher reads one registry for the signing package.
type fetcher struct {
	c        *Client
	registry string
}

var _ signing.Fetcher = (*fetcher)(nil)

func (f *fetcher) repository(repo string) *remote.Repository {
	return &remote.Repository{
		Client:    f.c.auth,
		Reference: registry.Reference{Registry: f.registry, Repository: repo},
		PlainHTTP: f.c.PlainHTTP(f.registry),
	}
}

// Resolve implements signing.Fetcher.
func (f *fetcher) Resolve(ctx context.Context, repo, tag string) (string, error) {
	desc, err := f.repository(repo).Resolve(ctx, tag)
	if err != nil {
		return "", f.error(repo, ":"+tag, err)
	}
	return desc.Digest.String(), nil
}

// Manifest implements signing.Fetcher; it verifies the manifest's digest.
func (f *fetcher) Manifest(ctx context.Context, repo, dgst string) (string, []byte, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		return "", nil, fmt.Errorf("%s@%s: %w", repo, dgst, err)
	}
	desc, rc, err := f.repository(repo).Manifests().FetchReference(ctx, d.String())
	if err != nil {
		return "", nil, f.error(repo, "@"+dgst, err)
	}
	defer rc.Close()
	if desc.Size > MaxManifestSize {
		return "", nil, fmt.Errorf("%s@%s: manifest: %w: %d bytes, the limit is %d", repo, dgst, ErrTooLarge, desc.Size, MaxManifestSize)
	}
	b, err := content.ReadAll(rc, desc)
	if err != nil {
		return "", nil, fmt.Errorf("%s@%s: %w", repo, dgst, err)
	}
	return desc.MediaType, b, nil
}

// Blob implements signing.Fetcher. The caller checks the blob's digest.
func (f *fetcher) Blob(ctx context.Context, repo, dgst string) (io.ReadCloser, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", repo, dgst, err)
	}
	_, rc, err := f.repository(repo).Blobs().FetchReference(ctx, d.String())
	if err != nil {
		return nil, f.error(repo, " blob "+dgst, err)
	}
	return rc, nil
}

// Referrers implements signing.Fetcher with the referrers API, or cosign's
// and OCI's tag fallback where the registry has no referrers API.
func (f *fetcher) Referrers(ctx context.Context, repo, dgst string) ([]ocispec.Descriptor, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", repo, dgst, err)
	}
	var refs []ocispec.Descriptor
	err = f.repository(repo).Referrers(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d}, "", func(page []ocispec.Descriptor) error {
		refs = append(refs, page...)
		return nil
	})
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, f.error(repo, " referrers of "+dgst, err)
	}
	return refs, nil
}

// error describes err of what (":tag", "@digest") in repo; not-found errors
// wrap signing.ErrNotFound.
func (f *fetcher) error(repo, what string, err error) error {
	ref := f.registry + "/" + repo + what
	if isNotFound(err) {
		return fmt.Errorf("%s: %w", ref, signing.ErrNotFound)
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		return &opError{msg: ref + ": " + responseKind(resp).Error() + ": " + describeResponse(resp), kind: responseKind(resp), cause: err}
	}
	return fmt.Errorf("%s: %w", ref, err)
}

// isNotFound reports whether err says that a repository, tag, manifest or
// blob does not exist.
func isNotFound(err error) bool {
	if errors.Is(err, errdef.ErrNotFound) {
		return true
	}
	var resp *errcode.ErrorResponse
	return errors.As(err, &resp) && responseKind(resp) == ErrNotFound
}

// SignOptions say how Sign stores a signature. The zero value stores it
// under cosign's sha256-<hex>.sig tag, with no annotations.
type SignOptions struct {
	// Referrer stores the signature as an OCI 1.1 referrer of the version
	// (as cosign sign --registry-referrers-mode=oci-1-1 does).
	Referrer bool
	// Annotations are signed with the payload (cosign sign -a key=value).
	Annotations map[string]string
	// TLog is the URL of a transparency log (Rekor) to record the signature
	// in; empty: offline.
	TLog string
	// Attestations are in-toto statements about the version (such as
	// signing.ProvenanceStatement's) to DSSE-sign with the same key and
	// store before PushSigned tags the version, as cosign attest does:
	// in one manifest that is an OCI referrer of the version and is also
	// under cosign's sha256-<hex>.att tag (signing.Attest). They are not
	// recorded in the transparency log TLog names.
	Attestations [][]byte
}

// Sign signs the version ref names with s, as cosign sign --key does
// offline (no transparency log), and attests opts.Attestations as cosign
// attest --key does: by digest, resolving ref's tag first. It
// uses the client's credentials, and plain HTTP where the client would. It
// returns the digest signed.
//
// Errors wrap ErrInvalidReference (neither version nor digest), ErrNotFound
// (no such version), ErrUnauthorized, ErrDenied or ErrRegistry when
// resolving, or else say what failed while storing the signature.
func (c *Client) Sign(ctx context.Context, ref Reference, s *signing.Signer, opts SignOptions) (digest.Digest, error) {
	if s == nil {
		return "", fmt.Errorf("sign %s: no signer", ref)
	}
	desc, err := c.resolve(ctx, "sign", ref)
	if err != nil {
		return "", err
	}
	if err := c.sign(ctx, ref, desc.Digest, s, opts); err != nil {
		return "", err
	}
	return desc.Digest, nil
}

// sign signs digest d of ref's repository.
func (c *Client) sign(ctx context.Context, ref Reference, d digest.Digest, s *signing.Signer, opts SignOptions) error {
	pinned := Reference{Registry: ref.Registry, Namespace: ref.Namespace, Name: ref.Name, Digest: d}
	var annotations map[string]any
	if len(opts.Annotations) > 0 {
		annotations = make(map[string]any, len(opts.Annotations))
		for k, v := range opts.Annotations {
			annotations[k] = v
		}
	}
	err := signing.Sign(ctx, s, pinned.String(), signing.SignOptions{
		Referrer:    opts.Referrer,
		Annotations: annotations,
		Remote:      c.ggcrOptions(),
		Insecure:    c.PlainHTTP(ref.Registry),
		TLog:        opts.TLog,
	})
	if err != nil {
		return fmt.Errorf("sign %s: %w", pinned, err)
	}
	err = signing.Attest(ctx, s, pinned.String(), opts.Attestations, signing.AttestOptions{
		Remote:   c.ggcrOptions(),
		Insecure: c.PlainHTTP(ref.Registry),
	})
	if err != nil {
		return fmt.Errorf("attest %s: %w", pinned, err)
	}
	return nil
}

// ggcrOptions are the go-containerregistry options that give cosign's
// libraries the client's credentials, User-Agent and transport.
func (c *Client) ggcrOptions() []ggcrremote.Option {
	opts := []ggcrremote.Option{
		ggcrremote.WithAuthFromKeychain(keychain{c.auth.Credential}),
		ggcrremote.WithUserAgent(c.opts.UserAgent),
	}
	if c.transport != http.DefaultTransport {
		opts = append(opts, ggcrremote.WithTransport(c.transport))
	}
	return opts
}

// keychain gives go-containerregistry the credentials oras-go uses.
type keychain struct {
	credential auth.CredentialFunc
}

var _ authn.ContextKeychain = keychain{}

// Resolve implements authn.Keychain.
func (k keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), r)
}

// ResolveContext implements authn.ContextKeychain.
func (k keychain) ResolveContext(ctx context.Context, r authn.Resource) (authn.Authenticator, error) {
	host := r.RegistryStr()
	if host == "index.docker.io" {
		host = "registry-1.docker.io" // the host oras-go's credential lookup knows Docker Hub by
	}
	cred, err := k.credential(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", host, err)
	}
	if cred == auth.EmptyCredential {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{
		Username:      cred.Username,
		Password:      cred.Password,
		IdentityToken: cred.RefreshToken,
		RegistryToken: cred.AccessToken,
	}), nil
}

// Verify finds the signatures and attestations of the version ref names (by
// tag scheme and by referrer) and verifies them with the keys policy trusts
// for its repository. The report says, for each, whether it verified and
// why not; Report.Verified tells whether the version is signed (and, under
// a requireSource, has an allowed provenance). Errors
// are those of Resolve, or of reading the registry.
func (c *Client) Verify(ctx context.Context, ref Reference, policy *signing.Policy) (*signing.Report, error) {
	desc, err := c.resolve(ctx, "verify", ref)
	if err != nil {
		return nil, err
	}
	rep, err := signing.Check(ctx, c.Fetcher(ref.Registry), policy, ref.Repository(), desc.Digest.String())
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", ref, err)
	}
	return rep, nil
}

// VerifyKeys is Verify with keys trusted for ref's repository.
func (c *Client) VerifyKeys(ctx context.Context, ref Reference, keys []signing.Key) (*signing.Report, error) {
	return c.Verify(ctx, ref, signing.NewPolicyOf(signing.Rule{Repositories: []string{ref.Repository()}, Keys: keys}))
}

// verifyRequired checks digest d against the client's trust policy for
// repository repo, reading the signatures from the repository of from. It
// returns a nil report when no policy covers repo, and an error wrapping
// ErrUnverified when the policy requires a verified signature and none
// verifies, or the provenance its requireSource asks for. Errors start with prefix, the operation.
func (c *Client) verifyRequired(ctx context.Context, prefix string, from Reference, repo string, d digest.Digest) (*signing.Report, error) {
	rule, covered := c.opts.TrustPolicy.For(repo)
	if !covered {
		return nil, nil
	}
	var f signing.Fetcher = &redirect{Fetcher: c.Fetcher(from.Registry), repo: from.Repository()}
	rep, err := signing.Check(ctx, f, c.opts.TrustPolicy, repo, d.String())
	if err != nil {
		return nil, fmt.Errorf("%s: check the signatures of %s: %w", prefix, d, err)
	}
	if rule.Require && !rep.Verified() {
		what := "no signature verified"
		if _, signed := rep.VerifiedBy(); signed {
			what = "provenance not verified"
		}
		return rep, &opError{
			msg: fmt.Sprintf("%s: refused: %s by the trust policy for %s: %s",
				prefix, what, strings.Join(rule.Repositories, ", "), rep.Reason()),
			kind: ErrUnverified,
		}
	}
	return rep, nil
}

// redirect reads repository repo whatever repository it is asked for, so
// that the trust of one repository can be checked on the signatures found
// in another (promotion checks the destination's policy on the source).
type redirect struct {
	signing.Fetcher
	repo string
}

func (r *redirect) Resolve(ctx context.Context, _, tag string) (string, error) {
	return r.Fetcher.Resolve(ctx, r.repo, tag)
}

func (r *redirect) Manifest(ctx context.Context, _, dgst string) (string, []byte, error) {
	return r.Fetcher.Manifest(ctx, r.repo, dgst)
}

func (r *redirect) Blob(ctx context.Context, _, dgst string) (io.ReadCloser, error) {
	return r.Fetcher.Blob(ctx, r.repo, dgst)
}

func (r *redirect) Referrers(ctx context.Context, _, dgst string) ([]ocispec.Descriptor, error) {
	return r.Fetcher.Referrers(ctx, r.repo, dgst)
}
