package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/gittest"
	"github.com/berth-registry/berth/signing"
)

// The tracked-sources tests (docs/sources.md): berth serve follows git
// repositories served by git http-backend, a tarball behind an HTTP
// server with ETags and a bundle image in distribution's registry, all
// started here on loopback; the tests commit, tag, move tags and push
// images, deliver webhooks instead of waiting for intervals, and check
// which versions appear, their provenance, the trust policy and the
// status berth reports.

// webhookSecret is what every source of these tests verifies deliveries with.
const webhookSecret = "e2e-webhook-secret"

// trackedSourcesConfig is the configuration of TestTrackedSources: its
// namespaces src (one source of each kind), stable (protected: its
// policy requires provenance from github.com/example) and trusted (whose
// policy requires provenance from loopback, which it gets).
type trackedSourcesConfig struct {
	key, pub                      string
	ops, charts, tarball, image   string
	userFile, passwordFile, hooks string
}

func (c trackedSourcesConfig) yaml() string {
	app := fmt.Sprintf(`      - package: app
        kind: git
        url: %q
        ref: "v*"
        dir: deploy
        webhookSecretFile: %q
`, c.ops, c.hooks)
	return fmt.Sprintf(`sources:
  signingKey: %q
  allowPrivate: true
  interval: 1h
trust:
  policies:
    - repositories: ["stable/*"]
      keys: [%q]
      require: true
      requireSource: ["https://github.com/example/*"]
    - repositories: ["trusted/*"]
      keys: [%q]
      require: true
      requireSource: ["http://127.0.0.1:*/*"]
namespaces:
  - name: src
    sources:
%s      - package: web
        kind: git
        url: %q
        ref: main
        dir: chart
        format: helm
        credentials:
          usernameFile: %q
          passwordFile: %q
        webhookSecretFile: %q
      - package: kafka
        kind: http
        url: %q
        dir: kafka
        webhookSecretFile: %q
      - package: cockroachdb
        kind: image
        url: %q
        webhookSecretFile: %q
  - name: stable
    sources:
%s  - name: trusted
    sources:
%s`, c.key, c.pub, c.pub, app, c.charts, c.userFile, c.passwordFile, c.hooks, c.tarball, c.hooks, c.image, c.hooks, app, app)
}

// TestTrackedSources: berth serve follows
//   - a public git repository's tags v* (a plain package, which takes its
//     versions from the tags): v1.0.0 and v1.1.0 become versions, a tag
//     release-2 does not; the versions carry an SLSA provenance
//     attestation, signed with berth's key, naming the repository and the
//     commit, which cosign verify-attestation verifies; v1.0.0 moved to
//     another commit is refused (reason refused) and its version stays,
//     while a new tag v1.2.0 still becomes a version;
//   - the same tags in a protected namespace whose policy requires
//     provenance from github.com/example: refused, naming the source, and
//     no version is tagged; in one whose policy names loopback, the
//     versions are tagged and verified;
//   - a private repository's main branch (basic auth from credential
//     files) holding a Helm chart: a commit outside the chart publishes
//     nothing new, one that changes the chart without a new version is
//     refused, one that bumps the version publishes it;
//   - a tarball with an ETag: a check of an unchanged tarball is a
//     conditional GET answered 304 and builds nothing; a new tarball is
//     built;
//   - a bundle image whose tag moves to another bundle.
//
// Webhooks trigger every check: GitHub's, signed (X-Hub-Signature-256),
// GitLab's, with its token, and ?source= for the sources that are not
// git; a bad signature or token gets 401. The change feed holds the
// sources' events, and berth sources shows their status.
func TestTrackedSources(t *testing.T) {
	gittest.Require(t)
	requireCosign(t)
	requireTool(t, "distribution's registry", registryBin)
	key, pub := provenanceKey(t, t.TempDir())

	// A public repository of a plain package, tagged v1.0.0, v1.1.0 and
	// release-2 (which the pattern v* does not match).
	publicRoot, privateRoot := t.TempDir(), t.TempDir()
	ops := newGitRepo(t, publicRoot, "ops.git", gittest.Serve(t, publicRoot, gittest.Options{}), "")
	c1 := ops.commit(t, "one", plainFiles("deploy", "one"))
	ops.tag(t, "v1.0.0", c1)
	c2 := ops.commit(t, "two", plainFiles("deploy", "two"))
	ops.tag(t, "v1.1.0", c2)
	ops.tag(t, "release-2", c2)
	ops.push(t, "main", "v1.0.0", "v1.1.0", "release-2")

	// A private repository whose main branch holds a chart at 0.1.0.
	const gitPassword = "e2e-git-password"
	passwordFile := writeSecretFile(t, "the git server's password", gitPassword)
	userFile := filepath.Join(t.TempDir(), "username")
	if err := os.WriteFile(userFile, []byte(gittest.User+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	charts := newGitRepo(t, privateRoot, "charts.git", gittest.Serve(t, privateRoot, gittest.Options{Password: gitPassword}), gitPassword)
	w1 := charts.commit(t, "web 0.1.0", chartFiles("chart", "0.1.0", "one"))
	charts.push(t, "main")

	// A tarball with an ETag, and a bundle image.
	tarballs := startTarballServer(t)
	kafka := tarGzTree(t, kudoFixture(t, "kafka", "2.5.1-1.3.2"), "kafka")
	tarballs.put("/kafka.tgz", kafka)
	upstream := startUpstreamRegistry(t, "")
	bundle := func(version string) string {
		// Gzipped: pkgsource reads gzipped tar layers only.
		ref := pushBundleImageLayer(t, filepath.Join(fixtures, "olm-community", "cockroachdb", version), upstream.addr, "ops/cockroachdb-bundle", "latest", true)
		return ref[strings.Index(ref, "@")+1:]
	}
	firstBundle := bundle("5.0.4")

	cfg := filepath.Join(t.TempDir(), "berth.yaml")
	doc := trackedSourcesConfig{
		key: key, pub: pub,
		ops: ops.url, charts: charts.url, tarball: tarballs.url + "/kafka.tgz", image: upstream.addr + "/ops/cockroachdb-bundle:latest",
		userFile: userFile, passwordFile: passwordFile, hooks: writeSecretFile(t, "the webhook secret", webhookSecret),
	}.yaml()
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	read := open(s)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth serve's log:\n%s", s.logs())
		}
	})
	github := func(repo, ref string) delivery {
		return delivery{github: "push", secret: webhookSecret, body: githubPush(repo, ref)}
	}
	// source targets one source, of any kind, with a signed delivery.
	source := func(ns, pkg string) delivery {
		d := github("https://example.com/unrelated.git", "refs/heads/main")
		d.query = "source=" + url.QueryEscape(ns+"/"+pkg)
		return d
	}

	t.Run("status lists every source, without credentials", func(t *testing.T) {
		var got []string
		for _, src := range sourcesOf(t, read).Sources {
			got = append(got, src.Namespace+"/"+src.Package+" "+src.Kind+" "+src.URL)
			if src.Interval == "" {
				t.Errorf("%s/%s: no interval", src.Namespace, src.Package)
			}
		}
		want := []string{
			"src/app git " + ops.url, "src/cockroachdb image " + upstream.addr + "/ops/cockroachdb-bundle:latest",
			"src/kafka http " + tarballs.url + "/kafka.tgz", "src/web git " + charts.url,
			"stable/app git " + ops.url, "trusted/app git " + ops.url,
		}
		if !slices.Equal(got, want) {
			t.Errorf("GET /api/v1/sources lists\n%s\nwant, in this order,\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		code, body := s.get(t, "/api/v1/sources/key")
		if code != http.StatusOK || strings.TrimSpace(body) != strings.TrimSpace(string(readFile(t, pub))) {
			t.Errorf("GET /api/v1/sources/key: %d %q, want the public key %s", code, body, pub)
		}
	})

	var published map[string]string
	t.Run("tags matching v* become versions", func(t *testing.T) {
		// The repository's three sources, in src, stable and trusted.
		mustDeliver(t, s.url(), github(ops.url, "refs/tags/v1.1.0"), 3)
		published = waitVersions(t, read, "src/app", "1.0.0", "1.1.0")
		if tags := versionTags(t, read, "src/app"); !slices.Equal(tags, []string{"1.0.0", "1.1.0"}) {
			t.Errorf("src/app's version tags are %q, want 1.0.0 and 1.1.0 (release-2 does not match v*)", tags)
		}
		st := waitSource(t, read, "src", "app", "v1.0.0 and v1.1.0 built", func(s apiv1.Source) bool {
			r0, ok0 := refOf(s, "refs/tags/v1.0.0")
			r1, ok1 := refOf(s, "refs/tags/v1.1.0")
			return ok0 && ok1 && r0.Version == "1.0.0" && r1.Version == "1.1.0"
		})
		r0, _ := refOf(st, "refs/tags/v1.0.0")
		r1, _ := refOf(st, "refs/tags/v1.1.0")
		if r0.Revision != c1 || r1.Revision != c2 || r0.Digest != published["1.0.0"] || r1.Digest != published["1.1.0"] {
			t.Errorf("refs %+v and %+v: want commits %s and %s, digests %s and %s", r0, r1, c1, c2, published["1.0.0"], published["1.1.0"])
		}
		if _, ok := refOf(st, "refs/tags/release-2"); ok {
			t.Errorf("the status lists refs/tags/release-2, which v* does not match: %+v", st.Refs)
		}
		if st.LastError != nil || st.LastCheck == nil || st.LastPublished == nil {
			t.Errorf("status after the build: last check %v, last published %+v, last error %+v", st.LastCheck, st.LastPublished, st.LastError)
		}
	})

	t.Run("provenance verifies with cosign", func(t *testing.T) {
		digest := published["1.1.0"]
		if digest == "" {
			t.Skip("src/app:1.1.0 was not published")
		}
		out := cosign(t, "", "verify-attestation", "--type", "slsaprovenance", "--key", pub, "--insecure-ignore-tlog", s.addr+"/src/app@"+digest).stdout
		statements := attestedStatements(t, out)
		if !slices.ContainsFunc(statements, func(st provenanceStatement) bool {
			return st.names(digest, ops.url, c2)
		}) {
			t.Errorf("cosign verify-attestation of src/app@%s: no SLSA provenance naming the subject, %s and commit %s:\n%s", digest, ops.url, c2, out)
		}
	})

	t.Run("a protected namespace refuses a source its policy does not name", func(t *testing.T) {
		st := waitSource(t, read, "stable", "app", "refused by the policy", func(s apiv1.Source) bool {
			return failedWith(s, apiv1.SourceReasonRefused, ops.url)
		})
		if !strings.Contains(st.LastError.Message, "https://github.com/example/*") {
			t.Errorf("the refusal does not name the policy's globs: %s", st.LastError.Message)
		}
		if tags := versionTags(t, read, "stable/app"); len(tags) != 0 {
			t.Errorf("stable/app holds the version tags %q, refused by its policy", tags)
		}
		if st.LastPublished != nil {
			t.Errorf("stable/app's status says %+v was published", st.LastPublished)
		}
		// The same source under a policy that names it: tagged, verified.
		waitVersions(t, read, "trusted/app", "1.0.0", "1.1.0")
		waitVerified(t, s, "trusted/app", "1.1.0", true, nil)
	})

	t.Run("a moved tag is refused and its version stays", func(t *testing.T) {
		c3 := ops.commit(t, "three", plainFiles("deploy", "three"))
		ops.tag(t, "v1.0.0", c3)
		ops.push(t, "main", "v1.0.0")
		mustDeliver(t, s.url(), github(ops.url, "refs/tags/v1.0.0"), 3)
		st := waitSource(t, read, "src", "app", "the moved tag refused", func(s apiv1.Source) bool {
			return failedWith(s, apiv1.SourceReasonRefused, "1.0.0")
		})
		if r, _ := refOf(st, "refs/tags/v1.0.0"); r.Error == "" {
			t.Errorf("the moved tag's entry %+v says nothing of its refusal", r)
		}
		// A new tag still becomes a version; v1.0.0 keeps its first digest.
		ops.tag(t, "v1.2.0", c3)
		ops.push(t, "v1.2.0")
		mustDeliver(t, s.url(), github(ops.url, "refs/tags/v1.2.0"), 3)
		now := waitVersions(t, read, "src/app", "1.0.0", "1.1.0", "1.2.0")
		if published != nil && now["1.0.0"] != published["1.0.0"] {
			t.Errorf("src/app:1.0.0 is %s after its tag moved, was %s", now["1.0.0"], published["1.0.0"])
		}
		if tags := versionTags(t, read, "src/app"); !slices.Equal(tags, []string{"1.0.0", "1.1.0", "1.2.0"}) {
			t.Errorf("src/app's version tags are %q", tags)
		}
	})

	t.Run("a branch builds when its version changes", func(t *testing.T) {
		mustDeliver(t, s.url(), github(charts.url, "refs/heads/main"), 1)
		waitVersions(t, read, "src/web", "0.1.0")
		waitSource(t, read, "src", "web", "main built at "+w1, func(s apiv1.Source) bool {
			return s.Revision == w1 && s.LastPublished != nil && s.LastPublished.Version == "0.1.0" && s.LastPublished.Revision == w1
		})
		if st := sourceOf(t, read, "src", "web"); st.URL != charts.url {
			t.Errorf("the private source's URL is %q, want %q", st.URL, charts.url)
		}

		// A commit outside the chart: checked, nothing new, no error.
		w2 := charts.commit(t, "readme", map[string]string{"README.md": "web\n"})
		charts.push(t, "main")
		mustDeliver(t, s.url(), github(charts.url, "refs/heads/main"), 1)
		st := waitSource(t, read, "src", "web", "main checked at "+w2, func(s apiv1.Source) bool { return s.Revision == w2 })
		if st.LastError != nil || st.LastPublished == nil || st.LastPublished.Revision != w1 {
			t.Errorf("after a commit that leaves the chart as it was: last error %+v, last published %+v (want %s)", st.LastError, st.LastPublished, w1)
		}

		// The chart changes, its version does not: refused.
		charts.commit(t, "same version", chartFiles("chart", "0.1.0", "changed"))
		charts.push(t, "main")
		mustDeliver(t, s.url(), delivery{gitlab: "Push Hook", secret: webhookSecret, body: gitlabPush(charts.url, "refs/heads/main")}, 1)
		waitSource(t, read, "src", "web", "the unchanged version refused", func(s apiv1.Source) bool {
			return failedWith(s, apiv1.SourceReasonRefused, "0.1.0")
		})
		if tags := versionTags(t, read, "src/web"); !slices.Equal(tags, []string{"0.1.0"}) {
			t.Errorf("src/web's version tags are %q, want 0.1.0 alone", tags)
		}

		// The version is bumped: published.
		w4 := charts.commit(t, "web 0.2.0", chartFiles("chart", "0.2.0", "changed"))
		charts.push(t, "main")
		mustDeliver(t, s.url(), delivery{gitlab: "Push Hook", secret: webhookSecret, body: gitlabPush(charts.url, "refs/heads/main")}, 1)
		waitVersions(t, read, "src/web", "0.1.0", "0.2.0")
		waitSource(t, read, "src", "web", "0.2.0 published", func(s apiv1.Source) bool {
			return s.LastError == nil && s.LastPublished != nil && s.LastPublished.Version == "0.2.0" && s.LastPublished.Revision == w4
		})
	})

	t.Run("an unchanged tarball is not built again", func(t *testing.T) {
		mustDeliver(t, s.url(), source("src", "kafka"), 1)
		waitVersions(t, read, "src/kafka", "2.5.1_1.3.2")
		first := waitSource(t, read, "src", "kafka", "the tarball built", func(s apiv1.Source) bool {
			return s.Revision == etagOf(kafka) && s.LastPublished != nil
		})
		notModified := tarballs.answered(http.StatusNotModified)
		mustDeliver(t, s.url(), source("src", "kafka"), 1)
		st := waitSource(t, read, "src", "kafka", "checked again", func(s apiv1.Source) bool {
			return s.LastCheck != nil && s.LastCheck.After(*first.LastCheck)
		})
		if got := tarballs.answered(http.StatusNotModified); got <= notModified {
			t.Errorf("checking an unchanged tarball sent no conditional GET answered 304 (%d before, %d after)", notModified, got)
		}
		if st.LastPublished == nil || *st.LastPublished != *first.LastPublished || st.LastError != nil {
			t.Errorf("after an unchanged check: last published %+v (was %+v), last error %+v", st.LastPublished, first.LastPublished, st.LastError)
		}
		tarballs.put("/kafka.tgz", tarGzTree(t, kudoFixture(t, "kafka", "2.5.0-1.3.1"), "kafka"))
		mustDeliver(t, s.url(), source("src", "kafka"), 1)
		waitVersions(t, read, "src/kafka", "2.5.1_1.3.2", "2.5.0_1.3.1")
	})

	t.Run("a bundle image whose tag moves", func(t *testing.T) {
		mustDeliver(t, s.url(), source("src", "cockroachdb"), 1)
		waitVersions(t, read, "src/cockroachdb", "5.0.4")
		waitSource(t, read, "src", "cockroachdb", "the bundle built", func(s apiv1.Source) bool { return s.Revision == firstBundle })
		second := bundle("5.0.3")
		mustDeliver(t, s.url(), source("src", "cockroachdb"), 1)
		waitVersions(t, read, "src/cockroachdb", "5.0.3", "5.0.4")
		waitSource(t, read, "src", "cockroachdb", "the moved tag built", func(s apiv1.Source) bool {
			return s.Revision == second && s.LastPublished != nil && s.LastPublished.Version == "5.0.3"
		})
	})

	t.Run("webhooks that do not verify are refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			d    delivery
			want int
		}{
			{"GitHub, wrong secret", delivery{github: "push", secret: "not-the-secret", body: githubPush(ops.url, "refs/tags/v1.1.0")}, http.StatusUnauthorized},
			{"GitHub, signature of another body", delivery{github: "push", secret: webhookSecret, body: githubPush(ops.url, "refs/tags/v1.1.0"),
				signed: githubPush(ops.url, "refs/tags/v9.9.9")}, http.StatusUnauthorized},
			{"GitLab, wrong token", delivery{gitlab: "Push Hook", secret: "not-the-secret", body: gitlabPush(charts.url, "refs/heads/main")}, http.StatusUnauthorized},
			{"no source of that URL", github("http://127.0.0.1:1/elsewhere.git", "refs/heads/main"), http.StatusUnauthorized},
			{"?source= with the wrong secret", func() delivery { d := source("src", "kafka"); d.secret = "not-the-secret"; return d }(), http.StatusUnauthorized},
			{"a body over 1 MiB", github(ops.url+strings.Repeat("x", 1<<20), "refs/heads/main"), http.StatusRequestEntityTooLarge},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if code, _ := deliver(t, s.url(), tc.d); code != tc.want {
					t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
				}
			})
		}
	})

	t.Run("berth sources", func(t *testing.T) {
		var listed apiv1.Sources
		out := berth(t, "", "sources", "src", "--server", s.addr, "--format", "json").stdout
		if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed.Sources) != 4 {
			t.Errorf("berth sources src --format json: %v, want the 4 sources of src:\n%s", err, out)
		}
		table := berth(t, "", "sources", "--server", s.addr).stdout
		for _, want := range []string{"src/app", "stable/app", ops.url, apiv1.SourceReasonRefused} {
			if !strings.Contains(table, want) {
				t.Errorf("berth sources does not show %q:\n%s", want, table)
			}
		}
		berth(t, "", "sources", "check", "src/kafka", "--server", s.addr)
		if key := berth(t, "", "sources", "key", "--server", s.addr).stdout; strings.TrimSpace(key) != strings.TrimSpace(string(readFile(t, pub))) {
			t.Errorf("berth sources key printed %q, want %s", key, pub)
		}
	})

	t.Run("the change feed holds the sources' events", func(t *testing.T) {
		changes := sourceChanges(t, read)
		for _, want := range []struct{ ns, name, status, version, reason string }{
			{"src", "app", apiv1.SourcePublished, "1.1.0", ""},
			{"src", "web", apiv1.SourcePublished, "0.2.0", ""},
			{"src", "app", apiv1.SourceFailed, "", apiv1.SourceReasonRefused},
			{"stable", "app", apiv1.SourceFailed, "", apiv1.SourceReasonRefused},
		} {
			if !hasChange(changes, want.ns, want.name, want.status, want.version, want.reason) {
				t.Errorf("GET /api/v1/changes has no source event %+v among %+v", want, changes)
			}
		}
	})
}

// provenanceStatement is the part of an in-toto statement with an SLSA
// v0.2 predicate that the tests read.
type provenanceStatement struct {
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	Predicate struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
		Materials []struct {
			URI    string            `json:"uri"`
			Digest map[string]string `json:"digest"`
		} `json:"materials"`
	} `json:"predicate"`
}

// names reports whether the statement is SLSA provenance of subject
// (sha256:<hex>) by a builder, with the git repository url at commit as
// its material.
func (st provenanceStatement) names(subject, url, commit string) bool {
	if st.PredicateType != signing.PredicateSLSAProvenance || st.Predicate.Builder.ID == "" {
		return false
	}
	hex := strings.TrimPrefix(subject, "sha256:")
	if !slices.ContainsFunc(st.Subject, func(s struct {
		Digest map[string]string `json:"digest"`
	}) bool {
		return s.Digest["sha256"] == hex
	}) {
		return false
	}
	for _, m := range st.Predicate.Materials {
		if m.URI == url && m.Digest["sha1"] == commit {
			return true
		}
	}
	return false
}

// attestedStatements decodes what cosign verify-attestation printed: one
// DSSE envelope per line, whose payload is the statement.
func attestedStatements(t *testing.T, out string) []provenanceStatement {
	t.Helper()
	var statements []provenanceStatement
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var envelope struct {
			Payload string `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &envelope) != nil || envelope.Payload == "" {
			continue
		}
		payload, err := base64.StdEncoding.DecodeString(envelope.Payload)
		if err != nil {
			t.Fatalf("an attestation's payload is not base64: %v", err)
		}
		var st provenanceStatement
		if err := json.Unmarshal(payload, &st); err != nil {
			t.Fatalf("an attestation's payload is not an in-toto statement: %v\n%s", err, payload)
		}
		statements = append(statements, st)
	}
	return statements
}

// TestHostileTrackedSources: a tarball bomb, a tarball of too many files
// and a redirect to a host not allowed are each refused with their reason
// (limit, limit, denied), publish nothing, and are failed events of the
// change feed. berth creates its provenance key in its data directory on
// first start and serves the public half.
func TestHostileTrackedSources(t *testing.T) {
	tarballs := startTarballServer(t)
	tarballs.put("/bomb.tgz", tarGzFiles(t, "bomb", map[string]string{"manifests/zeros.yaml": strings.Repeat("\x00", 32<<20)}))
	many := map[string]string{}
	for i := range 300 {
		many[fmt.Sprintf("manifests/cm-%03d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n", i)
	}
	tarballs.put("/many.tgz", tarGzFiles(t, "many", many))
	tarballs.put("/ok.tgz", tarGzFiles(t, "ok", plainFiles(".", "fine")))
	// localhost is not 127.0.0.1, the only host allowed.
	_, port, _ := strings.Cut(strings.TrimPrefix(tarballs.url, "http://"), ":")
	redirect := httptest.NewServer(http.RedirectHandler("http://localhost:"+port+"/ok.tgz", http.StatusFound))
	t.Cleanup(redirect.Close)

	hooks := writeSecretFile(t, "the webhook secret", webhookSecret)
	entry := func(pkg, url, dir string) string {
		return fmt.Sprintf("      - {package: %s, kind: http, url: %q, dir: %s, webhookSecretFile: %q}\n", pkg, url, dir, hooks)
	}
	cfg := filepath.Join(t.TempDir(), "berth.yaml")
	doc := "sources:\n  allowPrivate: true\n  allowHosts: [\"127.0.0.1\"]\n  interval: 1h\n  maxBytes: 8MiB\n  maxFiles: 100\n" +
		"namespaces:\n  - name: hostile\n    sources:\n" +
		entry("bomb", tarballs.url+"/bomb.tgz", "bomb") + entry("many", tarballs.url+"/many.tgz", "many") + entry("redirected", redirect.URL+"/ok.tgz", "ok")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	keyFile := filepath.Join(s.data, "provenance.key")
	secrets.addPEM(t, "the provenance key", keyFile)
	code, body := s.get(t, "/api/v1/sources/key")
	if pub := readFile(t, filepath.Join(s.data, "provenance.pub")); code != http.StatusOK || strings.TrimSpace(body) != strings.TrimSpace(string(pub)) {
		t.Errorf("GET /api/v1/sources/key: %d %q, want <data>/provenance.pub", code, body)
	}
	read := open(s)
	for _, tc := range []struct{ pkg, reason, word string }{
		{"bomb", apiv1.SourceReasonLimit, "bytes"},
		{"many", apiv1.SourceReasonLimit, "files"},
		{"redirected", apiv1.SourceReasonDenied, "localhost"},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			d := delivery{github: "push", secret: webhookSecret, body: []byte(`{"zen":"hostile"}`), query: "source=hostile/" + tc.pkg}
			mustDeliver(t, s.url(), d, 1)
			st := waitSource(t, read, "hostile", tc.pkg, "refused with reason "+tc.reason, func(s apiv1.Source) bool {
				return failedWith(s, tc.reason)
			})
			if !strings.Contains(st.LastError.Message, tc.word) {
				t.Errorf("the reason %s says %q, which does not mention %s", tc.reason, st.LastError.Message, tc.word)
			}
			if tags := versionTags(t, read, "hostile/"+tc.pkg); len(tags) != 0 || st.LastPublished != nil {
				t.Errorf("hostile/%s: tags %q, last published %+v: want nothing published", tc.pkg, tags, st.LastPublished)
			}
			if !hasChange(sourceChanges(t, read), "hostile", tc.pkg, apiv1.SourceFailed, "", tc.reason) {
				t.Errorf("the change feed has no failed event of hostile/%s with reason %s", tc.pkg, tc.reason)
			}
		})
	}
}

// TestTrackedSourcesOnReplicas: two replicas with auth on, sharing
// PostgreSQL, S3 storage and berth's provenance key, behind a round-robin
// proxy: a webhook delivered through the proxy, whichever replica gets
// it, gets the source checked and the tag published; only the leader
// fetches from the git server; GET /api/v1/sources answers the same on
// both.
func TestTrackedSourcesOnReplicas(t *testing.T) {
	gittest.Require(t)
	dir := t.TempDir()
	key, _ := provenanceKey(t, dir)

	// The git server notes which process each request comes from, once
	// the replicas are known.
	var mu sync.Mutex
	var pids []int
	fetchers := map[int]int{}
	gitRoot := t.TempDir()
	var gitPort int
	gitURL := gittest.Serve(t, gitRoot, gittest.Options{OnRequest: func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		// The test's own pushes (git-receive-pack) are not fetches.
		if pids != nil && (r.URL.Query().Get("service") == "git-upload-pack" || strings.HasSuffix(r.URL.Path, "/git-upload-pack")) {
			fetchers[peerPID(r.RemoteAddr, gitPort, pids...)]++
		}
	}})
	_, port, _ := strings.Cut(strings.TrimPrefix(gitURL, "http://"), ":")
	gitPort, _ = strconv.Atoi(port)
	ops := newGitRepo(t, gitRoot, "ops.git", gitURL, "")
	ops.tag(t, "v1.0.0", ops.commit(t, "one", plainFiles("deploy", "one")))

	hooks := writeSecretFile(t, "the webhook secret", webhookSecret)
	extra := fmt.Sprintf(`sources:
  signingKey: %q
  allowPrivate: true
  interval: 1h
namespaces:
  - name: a
    sources:
      - {package: app, kind: git, url: %q, ref: "v*", dir: deploy, webhookSecretFile: %q}
`, key, ops.url, hooks)
	a, b, front := authReplicas(t, "sources", authOptions{extra: extra})
	mu.Lock()
	pids = []int{a.cmd.Process.Pid, b.cmd.Process.Pid}
	mu.Unlock()
	admin := creds{"admin", passwordOf("admin")}
	readA, readB := as(a, admin), as(b, admin)

	// Two deliveries in a row through the proxy: one reaches each replica.
	ops.push(t, "main", "v1.0.0")
	mustDeliver(t, front.url(), delivery{github: "push", secret: webhookSecret, body: githubPush(ops.url, "refs/tags/v1.0.0")}, 1)
	waitVersions(t, readA, "a/app", "1.0.0")
	ops.tag(t, "v1.1.0", ops.commit(t, "two", plainFiles("deploy", "two")))
	ops.push(t, "main", "v1.1.0")
	mustDeliver(t, front.url(), delivery{github: "push", secret: webhookSecret, body: githubPush(ops.url, "refs/tags/v1.1.0")}, 1)
	for _, read := range []reader{readA, readB} {
		waitVersions(t, read, "a/app", "1.0.0", "1.1.0")
	}

	// Only the leader fetched.
	leader := a
	if leadsAs(t, readB) {
		leader = b
	}
	mu.Lock()
	seen := fetchers
	mu.Unlock()
	if len(seen) != 1 || seen[leader.cmd.Process.Pid] == 0 {
		t.Errorf("the git server's requests came from %v (process: requests; 0 is neither replica), want the leader %d alone (replicas %v)",
			seen, leader.cmd.Process.Pid, pids)
	}

	// Both replicas report the same status, from the store they share
	// (the leader saves it there in batches, so it may trail the tags).
	for _, read := range []reader{readA, readB} {
		waitSource(t, read, "a", "app", "1.1.0 published", func(s apiv1.Source) bool {
			return s.LastPublished != nil && s.LastPublished.Version == "1.1.0"
		})
	}
	fromA, fromB := sourcesOf(t, readA), sourcesOf(t, readB)
	ja, _ := json.Marshal(fromA)
	jb, _ := json.Marshal(fromB)
	if string(ja) != string(jb) {
		t.Errorf("GET /api/v1/sources differs between the replicas:\nA: %s\nB: %s", ja, jb)
	}
	if len(fromA.Sources) != 1 {
		t.Errorf("GET /api/v1/sources: %s, want a/app alone", ja)
	}
}

// leadsAs reports whether the replica read leads (berth_leader 1 in
// /metrics, which admin may read).
func leadsAs(t *testing.T, read reader) bool {
	t.Helper()
	code, body := read(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "berth_leader "); ok {
			return v == "1"
		}
	}
	t.Fatalf("no berth_leader in /metrics")
	return false
}
