package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/pkgsource"
	"github.com/berth-registry/berth/signing"
)

// check checks s once, builds what changed, keeps its state for the next
// flush and returns when it is due next.
func (t *Tracker) check(ctx context.Context, s *tracked) time.Time {
	start := time.Now()
	t.mu.Lock()
	st, ok := t.states[s.key]
	t.mu.Unlock()
	if !ok {
		st = State{Key: s.key, Spec: s.fingerprint}
	}
	var result string
	if pkgsource.IsPattern(s.src.Ref) {
		result = t.checkTags(ctx, s, &st)
	} else {
		result = t.checkOne(ctx, s, &st)
	}
	if ctx.Err() != nil {
		// The leader stops: the check is done again by the next one.
		return st.NextCheck
	}
	end := time.Now()
	st.LastCheck = end
	st.NextCheck = end.Add(s.interval + jitter(s.interval))
	t.mu.Lock()
	t.states[s.key] = st
	t.dirty[s.key] = st
	t.mu.Unlock()
	t.metrics.checks.WithLabelValues(result).Inc()
	t.metrics.duration.Observe(end.Sub(start).Seconds())
	t.metrics.lastCheck.WithLabelValues(s.key.Namespace, s.key.Package).Set(float64(end.UnixNano()) / 1e9)
	return st.NextCheck
}

// name names s in logs.
func (s *tracked) name() string { return s.key.Namespace + "/" + s.key.Package }

// spec is s's pkgsource.Spec at ref ("" for its own), with its
// credentials read from their files.
func (s *tracked) spec(ref string) (pkgsource.Spec, error) {
	spec := s.src.Spec()
	if ref != "" {
		spec.Ref = ref
	}
	creds, err := s.credentials()
	if err != nil {
		return spec, err
	}
	spec.Credentials = creds
	return spec, nil
}

// checkOne checks a source of one ref (a branch, a tag, a commit, a URL,
// an image): it resolves it, compared with what it resolved before, and
// builds it when its revision is not the one last handled.
func (t *Tracker) checkOne(ctx context.Context, s *tracked, st *State) string {
	spec, err := s.spec("")
	if err != nil {
		t.fail(ctx, s, st, "", err)
		return checkFailed
	}
	r, err := pkgsource.Resolve(ctx, spec, st.Resolved, t.opts.Config.Sources.Limits())
	if err != nil {
		t.fail(ctx, s, st, "", err)
		return checkFailed
	}
	st.Resolved = r
	if r.Revision == st.Handled {
		st.LastError = st.HandledError
		return checkUnchanged
	}
	v, now, err := t.publish(ctx, s, spec, "")
	if err != nil {
		t.fail(ctx, s, st, "", err)
		if reason(err) != apiv1.SourceReasonFetch {
			st.Handled, st.HandledError = r.Revision, st.LastError
		}
		return checkChanged
	}
	st.Handled, st.HandledError, st.LastError = r.Revision, nil, nil
	if now {
		st.LastPublished = v
	}
	return checkChanged
}

// checkTags checks a tag pattern: one listing of the tags, and a build of
// each tag that is new or moved. A moved tag whose version was published
// is refused, unless the namespace allows overwrites.
func (t *Tracker) checkTags(ctx context.Context, s *tracked, st *State) string {
	spec, err := s.spec("")
	if err != nil {
		t.fail(ctx, s, st, "", err)
		return checkFailed
	}
	tags, err := pkgsource.ListTags(ctx, spec, s.src.Ref, t.opts.Config.Sources.Limits())
	if err != nil {
		t.fail(ctx, s, st, "", err)
		return checkFailed
	}
	prev := make(map[string]apiv1.SourceRef, len(st.Refs))
	for _, r := range st.Refs {
		prev[r.Ref] = r
	}
	result := checkUnchanged
	failed := false
	refs := make([]apiv1.SourceRef, 0, len(tags))
	for _, tag := range tags {
		p, seen := prev[tag.Ref]
		if seen && p.Revision == tag.Revision {
			refs = append(refs, p)
			failed = failed || p.Error != ""
			continue
		}
		result = checkChanged
		short := strings.TrimPrefix(tag.Ref, "refs/tags/")
		if seen && p.Version != "" && p.Digest != "" && !t.opts.Config.AllowOverwrite(s.key.Namespace) {
			err := &refusedError{fmt.Sprintf("tag %s moved from %s to %s: version %s is already published from %s; bump the version and tag it anew",
				short, p.Revision, tag.Revision, p.Version, p.Revision)}
			if p.Error != err.Error() {
				t.fail(ctx, s, st, p.Version, err)
			}
			p.Error = err.Error()
			refs = append(refs, p)
			failed = true
			continue
		}
		tagSpec := spec
		tagSpec.Ref = tag.Ref
		v, now, err := t.publish(ctx, s, tagSpec, strings.TrimPrefix(short, "v"))
		ref := apiv1.SourceRef{Ref: tag.Ref, Revision: tag.Revision}
		switch {
		case err != nil && reason(err) == apiv1.SourceReasonFetch:
			// Tried again at the next check.
			ref.Revision = ""
			ref.Error = err.Error()
			failed = true
			t.fail(ctx, s, st, "", err)
		case err != nil:
			ref.Error = err.Error()
			failed = true
			t.fail(ctx, s, st, "", err)
		default:
			ref.Version, ref.Digest = v.Version, v.Digest
			if now {
				st.LastPublished = v
			}
		}
		refs = append(refs, ref)
	}
	st.Refs = refs
	if !failed {
		st.LastError = nil
	}
	return result
}

// fail records err as the source's last error and tells OnEvent of it
// unless it is the error it had already.
func (t *Tracker) fail(ctx context.Context, s *tracked, st *State, version string, err error) {
	if ctx.Err() != nil {
		return // the leader stops: not a failure of the source
	}
	e := &apiv1.SourceError{Time: time.Now().UTC(), Reason: reason(err), Message: err.Error()}
	repeated := st.LastError != nil && st.LastError.Message == e.Message
	st.LastError = e
	if repeated {
		return
	}
	t.log.Warn("sources: check failed", "source", s.name(), "reason", e.Reason, "err", e.Message)
	t.event(ctx, apiv1.Change{Action: apiv1.ActionSource, Namespace: s.key.Namespace, Name: s.key.Package,
		Version: version, Status: apiv1.SourceFailed, Reason: e.Reason, Time: e.Time})
}

func (t *Tracker) event(ctx context.Context, c apiv1.Change) {
	if t.opts.OnEvent != nil {
		t.opts.OnEvent(ctx, c)
	}
}

// publish builds spec into a version of s's package and publishes it:
// signed, attested and tagged, in that order, through the registry. A
// version published already with the same content is not published again
// (now is false then); with other content it is refused unless the
// namespace allows overwrites. tagVersion is the version of a package
// that carries none (a tag pattern's tag without its v).
func (t *Tracker) publish(ctx context.Context, s *tracked, spec pkgsource.Spec, tagVersion string) (v *apiv1.SourceVersion, now bool, err error) {
	started := time.Now()
	b, err := pkgsource.BuildPackage(ctx, []pkgsource.Spec{spec}, pkgsource.BuildOptions{
		Limits: t.opts.Config.Sources.Limits(),
		Naming: pkgsource.Naming{Name: s.key.Package, DefaultName: s.key.Package, DefaultVersion: tagVersion},
		Format: pkgformat.Format(s.src.Format),
	})
	if err != nil {
		t.metrics.builds.WithLabelValues(buildFailed).Inc()
		return nil, false, err
	}
	built := b.Sources[0]
	version := b.Package.Metadata.Version
	ref := client.Reference{Registry: t.opts.RegistryHost, Namespace: s.key.Namespace, Name: s.key.Package, Tag: pkgformat.Tag(version)}
	v = &apiv1.SourceVersion{Version: version, Digest: b.Artifact.ManifestDesc.Digest.String(), Ref: built.Ref, Revision: built.Revision}
	same, err := t.published(ctx, ref, b.Artifact)
	if err != nil {
		t.metrics.builds.WithLabelValues(buildFailed).Inc()
		return nil, false, err
	}
	if same != "" {
		t.metrics.builds.WithLabelValues(buildUnchanged).Inc()
		v.Digest = same
		return v, false, nil
	}
	statement, err := signing.ProvenanceStatement(t.opts.RegistryHost+"/"+ref.Repository(), b.Artifact.ManifestDesc.Digest, signing.Provenance{
		BuilderID: t.opts.BuilderID,
		Sources: []signing.ProvenanceSource{{Kind: string(built.Kind), URI: built.URL, Ref: built.Ref, Revision: built.Revision,
			Dir: built.Dir, Destination: built.Destination}},
		Started:  started,
		Finished: time.Now(),
	})
	if err != nil {
		t.metrics.builds.WithLabelValues(buildFailed).Inc()
		return nil, false, err
	}
	desc, err := t.client.PushSigned(ctx, ref, b.Artifact, t.opts.Signer, client.SignOptions{Attestations: [][]byte{statement}})
	if err != nil {
		t.metrics.builds.WithLabelValues(buildFailed).Inc()
		return nil, false, err
	}
	t.metrics.builds.WithLabelValues(buildPublished).Inc()
	v.Digest, v.Time = desc.Digest.String(), time.Now().UTC()
	t.log.Info("sources: published", "source", s.name(), "version", version, "digest", v.Digest, "revision", built.Revision)
	t.event(ctx, apiv1.Change{Action: apiv1.ActionSource, Namespace: s.key.Namespace, Name: s.key.Package,
		Version: version, Digest: v.Digest, Status: apiv1.SourcePublished, Time: v.Time})
	return v, true, nil
}

// published says whether ref's version exists with art's content (its
// config and content blobs): it returns the digest it is published under,
// "" when the version does not exist or the namespace lets it be
// overwritten, and a refusal when it exists with other content.
func (t *Tracker) published(ctx context.Context, ref client.Reference, art *pkgformat.Artifact) (string, error) {
	desc, err := t.client.Resolve(ctx, ref)
	if errors.Is(err, client.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	repo := t.client.Repository(ref.Registry, ref.Repository())
	_, rc, err := repo.Manifests().FetchReference(ctx, desc.Digest.String())
	if err != nil {
		return "", fmt.Errorf("read the published %s: %w", ref, err)
	}
	body, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return "", fmt.Errorf("read the published %s: %w", ref, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return "", fmt.Errorf("read the published %s: %w", ref, err)
	}
	if m.Config.Digest == art.ConfigDesc.Digest && len(m.Layers) == 1 && m.Layers[0].Digest == art.ContentDesc.Digest {
		return desc.Digest.String(), nil
	}
	if t.opts.Config.AllowOverwrite(ref.Namespace) {
		return "", nil
	}
	from := m.Annotations[ocispec.AnnotationRevision]
	if from == "" {
		from = "another source or a push (" + desc.Digest.String() + ")"
	}
	return "", &refusedError{fmt.Sprintf("version %s is already published from %s with other content; bump the version", ref.Tag, from)}
}
