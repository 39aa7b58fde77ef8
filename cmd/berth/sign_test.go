package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// testPassword is the password of the keys the tests make.
const testPassword = "s3cret"

// signingRegistry starts berth's registry; when requireKey is set, tags in
// stable/* need a signature by it, as berth serve's trust policy does.
func signingRegistry(t *testing.T, requireKey string) string {
	t.Helper()
	var host string
	opts := registry.Options{}
	if requireKey != "" {
		k, err := signing.LoadPublicKey(requireKey)
		if err != nil {
			t.Fatal(err)
		}
		policy := signing.NewPolicyOf(signing.Rule{Repositories: []string{"stable/*"}, Keys: []signing.Key{k}, Require: true})
		c, err := client.New(client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts.AdmitTag = func(ctx context.Context, push registry.TagPush) error {
			return signing.Admit(ctx, c.Fetcher(host), policy, push.Repo, push.Tag, push.Digest.String())
		}
	}
	host = registrytest.NewBerth(t, opts, nil)
	return host
}

// orasRepo is an oras-go repository of host, for tests that write what
// berth would not.
func orasRepo(host, repo string) *remote.Repository {
	return &remote.Repository{Reference: orasregistry.Reference{Registry: host, Repository: repo}, PlainHTTP: true}
}

// pushChart pushes a chart version to host/repo and returns its digest.
func pushChart(t *testing.T, dir, host, repo, version string) string {
	t.Helper()
	name := repo[strings.LastIndex(repo, "/")+1:]
	chart := writeChart(t, filepath.Join(dir, "charts-"+version), name, version)
	var res pushResult
	decode(t, mustBerth(t, "push", chart, host+"/"+repo, "--format", "json"), &res)
	return res.Digest
}

// writePolicy writes a client trust policy file into a new directory of
// dir, with the key files copied next to it and named relatively.
func writePolicy(t *testing.T, dir, name, glob string, require bool, keys ...signingtest.KeyPair) string {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []string
	for i, k := range keys {
		b, err := os.ReadFile(k.PublicFile)
		if err != nil {
			t.Fatal(err)
		}
		file := "key" + string(rune('0'+i)) + ".pub"
		if err := os.WriteFile(filepath.Join(d, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, `"`+file+`"`)
	}
	doc := "policies:\n  - repositories: [\"" + glob + "\"]\n    keys: [" + strings.Join(files, ", ") + "]\n    require: " +
		map[bool]string{true: "true", false: "false"}[require] + "\n"
	file := filepath.Join(d, "trust.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// wantFail runs berth, wants exit code 1 and stderr containing want.
func wantFail(t *testing.T, want string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := berth(t, args...)
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("berth %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(args, " "), code, stderr, want)
	}
	return stdout, stderr
}

func TestSignVerifyCmd(t *testing.T) {
	dir := setup(t)
	t.Setenv(signing.PasswordEnv, testPassword)
	host := signingRegistry(t, "")
	key, other := signingtest.NewKeyPair(t, testPassword), signingtest.NewKeyPair(t, testPassword)
	d := map[string]string{}
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0", "5.0.0"} {
		d[v] = pushChart(t, dir, host, "charts/demo", v)
	}
	ref := func(v string) string { return host + "/charts/demo:" + v }

	// A tag is resolved and its digest signed.
	out := mustBerth(t, "sign", ref("1.0.0"), "--key", key.PrivateFile)
	want := "Signed " + host + "/charts/demo@" + d["1.0.0"] + " (resolved from 1.0.0)\nKey:       " + key.Key.ID +
		"\nStored as: tag " + signing.SignatureTag(digest.Digest(d["1.0.0"])) + "\n"
	if out != want {
		t.Errorf("sign output:\n%s\nwant:\n%s", out, want)
	}
	var signed signResult
	decode(t, mustBerth(t, "sign", ref("2.0.0"), "--key", key.PrivateFile, "--referrer", "-a", "ci=42", "--format", "json"), &signed)
	if signed != (signResult{Reference: host + "/charts/demo@" + d["2.0.0"], Digest: d["2.0.0"], ResolvedFrom: "2.0.0", KeyID: key.Key.ID, Kind: "referrer"}) {
		t.Errorf("sign json: %+v", signed)
	}
	out = mustBerth(t, "sign", host+"/charts/demo@"+d["5.0.0"], "--key", key.PrivateFile)
	if !strings.HasPrefix(out, "Signed "+host+"/charts/demo@"+d["5.0.0"]+"\n") {
		t.Errorf("sign by digest:\n%s", out)
	}

	// Under 4.0.0's signature tag, 1.0.0's signature; under 5.0.0's, in
	// place of its good one, a layer with no signature.
	ctx := context.Background()
	repo := orasRepo(host, "charts/demo")
	if _, err := oras.Copy(ctx, repo, signing.SignatureTag(digest.Digest(d["1.0.0"])), repo, signing.SignatureTag(digest.Digest(d["4.0.0"])), oras.DefaultCopyOptions); err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"critical":{}}`)
	layer := ocispec.Descriptor{MediaType: signing.SimpleSigningMediaType, Digest: digest.FromBytes(payload), Size: int64(len(payload))}
	if err := repo.Push(ctx, layer, strings.NewReader(string(payload))); err != nil {
		t.Fatal(err)
	}
	bad, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, "application/vnd.example", oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Tag(ctx, bad, signing.SignatureTag(digest.Digest(d["5.0.0"]))); err != nil {
		t.Fatal(err)
	}

	out = mustBerth(t, "verify", ref("1.0.0"), "--key", key.PublicFile)
	sigDigest, err := repo.Resolve(ctx, signing.SignatureTag(digest.Digest(d["1.0.0"])))
	if err != nil {
		t.Fatal(err)
	}
	want = "Verified " + ref("1.0.0") + " (" + d["1.0.0"] + "): signed by " + key.Key.ID + "\n\n" +
		"TYPE       DIGEST               KIND  KEY                      VERIFIED  REASON\n" +
		"signature  " + shortDigest(sigDigest.Digest.String()) + "  tag   " + shortKeyID(key.Key.ID) + "  yes       \n"
	if out != want {
		t.Errorf("verify output:\n%s\nwant:\n%s", out, want)
	}
	var res verifyResult
	decode(t, mustBerth(t, "verify", ref("2.0.0"), "--key", other.PublicFile, "--key", key.PublicFile, "--format", "json"), &res)
	if !res.Verified || res.SignedBy != key.Key.ID || res.Digest != d["2.0.0"] || len(res.Signatures) != 1 ||
		res.Signatures[0].Kind != "referrer" || res.Signatures[0].KeyID != key.Key.ID || res.Attestations == nil {
		t.Errorf("verify json: %+v", res)
	}

	failures := []struct {
		version, key, want string
	}{
		{"1.0.0", other.PublicFile, signingtest.Untrusted("charts/demo", other.Key)},
		{"2.0.0", other.PublicFile, signingtest.Untrusted("charts/demo", other.Key)},
		{"3.0.0", key.PublicFile, "no signature"},
		{"4.0.0", key.PublicFile, "payload digest mismatch: the signature is for " + d["1.0.0"] + ", not " + d["4.0.0"]},
		{"5.0.0", key.PublicFile, "bad signature: no " + signing.SignatureAnnotation + " annotation"},
	}
	for _, f := range failures {
		stdout, stderr := wantFail(t, "Error: verify "+ref(f.version)+": "+d[f.version]+" is not verified: "+f.want+"\n", "verify", ref(f.version), "--key", f.key)
		if !strings.HasPrefix(stdout, "Not verified "+ref(f.version)) {
			t.Errorf("verify %s: stdout %q", f.version, stdout)
		}
		if f.version != "3.0.0" && !strings.Contains(stdout, "signature  ") {
			t.Errorf("verify %s lists no signature:\n%s%s", f.version, stdout, stderr)
		}
		code, stdout, _ := berth(t, "verify", ref(f.version), "--key", f.key, "--format", "json")
		var res verifyResult
		decode(t, stdout, &res)
		if code != 1 || res.Verified || res.Reason != f.want {
			t.Errorf("verify %s --format json: exit %d, %+v", f.version, code, res)
		}
	}

	// A trust policy instead of keys: --trust-policy, $BERTH_TRUST_POLICY, the default file.
	policy := writePolicy(t, dir, "policy", "charts/*", false, key)
	mustBerth(t, "verify", ref("1.0.0"), "--trust-policy", policy)
	wantFail(t, "not verified: no trust policy covers charts/demo", "verify", ref("1.0.0"), "--trust-policy", writePolicy(t, dir, "elsewhere", "kudo/*", true, key))
	t.Setenv(trustPolicyEnv, policy)
	mustBerth(t, "verify", ref("1.0.0"))
	t.Setenv(trustPolicyEnv, "")
	wantFail(t, "no key to verify with", "verify", ref("1.0.0"))
	defaultPolicy := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "berth", "trust.yaml")
	if err := os.MkdirAll(filepath.Dir(defaultPolicy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(defaultPolicy, []byte("policies:\n  - repositories: [\"charts/*\"]\n    keys: [\""+other.PublicFile+"\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantFail(t, "not signed by a key trusted for charts/demo", "verify", ref("1.0.0"))
}

func TestPullTrustCmd(t *testing.T) {
	dir := setup(t)
	t.Setenv(signing.PasswordEnv, testPassword)
	host := signingRegistry(t, "")
	key, other := signingtest.NewKeyPair(t, testPassword), signingtest.NewKeyPair(t, testPassword)
	for _, repo := range []string{"stable/demo", "relaxed/demo", "open/demo"} {
		pushChart(t, dir, host, repo, "1.0.0")
	}
	strict := writePolicy(t, dir, "strict", "stable/*", true, key)
	relaxed := writePolicy(t, dir, "relaxed", "relaxed/*", false, key)
	stable := host + "/stable/demo:1.0.0"
	out := filepath.Join(dir, "out")

	// Unsigned, then signed by another key: refused, nothing written.
	refused := "Error: pull " + stable + ": refused: no signature verified by the trust policy for stable/*: "
	wantFail(t, refused+"no signature", "pull", stable, "--trust-policy", strict, "-o", out)
	mustBerth(t, "sign", stable, "--key", other.PrivateFile)
	wantFail(t, refused+"not signed by a key trusted for stable/demo", "pull", stable, "--trust-policy", strict, "-o", out)
	wantFail(t, "refused", "pull", stable, "--key", key.PublicFile, "-o", out)
	wantFail(t, "refused", "pull", stable, "--trust-policy", strict, "--tarball", "-o", out)
	t.Setenv(trustPolicyEnv, strict)
	wantFail(t, refused, "pull", stable, "-o", out)
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused pull wrote %s: %v", out, err)
	}

	// Signed by the trusted key.
	mustBerth(t, "sign", stable, "--key", key.PrivateFile, "--referrer")
	var res pullResult
	decode(t, mustBerth(t, "pull", stable, "-o", out, "--format", "json"), &res)
	if !res.Verified || res.SignedBy != key.Key.ID || res.Files != 3 {
		t.Errorf("pull json: %+v", res)
	}
	text := mustBerth(t, "pull", stable, "--key", key.PublicFile, "--key", other.PublicFile, "--tarball", "-o", out)
	if !strings.Contains(text, "Verified: signed by "+other.Key.ID+"\n") { // other's tag signature comes first
		t.Errorf("pull output:\n%s", text)
	}

	// require: false warns and pulls; outside every policy nothing is checked.
	code, stdout, stderr := berth(t, "pull", host+"/relaxed/demo:1.0.0", "--trust-policy", relaxed, "-o", filepath.Join(dir, "relaxed"))
	if code != 0 || !strings.Contains(stderr, "Warning: "+host+"/relaxed/demo:1.0.0 (sha256:") ||
		!strings.Contains(stderr, "is not verified: no signature; the trust policy does not require it") || !strings.Contains(stdout, "Extracted 3 files") {
		t.Errorf("pull under require: false: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, stdout, stderr = berth(t, "pull", host+"/open/demo:1.0.0", "-o", filepath.Join(dir, "open"), "--format", "json")
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || res.Verified || stderr != "" {
		t.Errorf("pull outside the policy: exit %d, %+v, %v, stderr %q", code, res, err, stderr)
	}
	t.Setenv(trustPolicyEnv, "")

	// The default policy file.
	defaultPolicy := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "berth", "trust.yaml")
	if err := os.MkdirAll(filepath.Dir(defaultPolicy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(defaultPolicy, []byte("policies:\n  - repositories: [\"open/*\"]\n    keys: [\""+key.PublicFile+"\"]\n    require: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantFail(t, "pull "+host+"/open/demo:1.0.0: refused: no signature verified by the trust policy for open/*: no signature", "pull", host+"/open/demo:1.0.0")

	// Bad policy files.
	for _, tt := range []struct {
		doc, want string
	}{
		{"policies:\n  - repositories: [\"stable/*\"]\n    keys: [missing.pub]\n", "policies[0].keys[0]: open " + filepath.Join(dir, "bad", "missing.pub") + ": no such file or directory"},
		{"policies:\n  - repositories: [\"stable\"]\n    keys: [x.pub]\n", `policies[0].repositories[0]: want a glob over namespace/name`},
		{"policies:\n  - repositories: [\"stable/*\"]\n", "policies[0].keys: at least one public key file is required"},
		{"policy:\n  - repositories: [\"stable/*\"]\n", "field policy not found"},
		{"", "no policies"},
	} {
		file := filepath.Join(dir, "bad", "trust.yaml")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(tt.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr := wantFail(t, tt.want, "pull", stable, "--trust-policy", file)
		if !strings.HasPrefix(stderr, "Error: trust policy "+file+": ") {
			t.Errorf("the error does not name the file: %s", stderr)
		}
	}
	wantFail(t, "Error: trust policy: open "+filepath.Join(dir, "none.yaml")+": no such file or directory", "pull", stable, "--trust-policy", filepath.Join(dir, "none.yaml"))
}

func TestPromoteCmd(t *testing.T) {
	dir := setup(t)
	t.Setenv(signing.PasswordEnv, testPassword)
	key, other := signingtest.NewKeyPair(t, testPassword), signingtest.NewKeyPair(t, testPassword)
	host := signingRegistry(t, key.PublicFile)
	d1 := pushChart(t, dir, host, "incubator/demo", "1.0.0")
	mustBerth(t, "sign", host+"/incubator/demo:1.0.0", "--key", key.PrivateFile)
	mustBerth(t, "sign", host+"/incubator/demo:1.0.0", "--key", key.PrivateFile, "--referrer")
	// The referrer is in incubator only.
	code, _, _ := berth(t, "verify", host+"/stable/demo@"+d1, "--key", key.PublicFile)
	if code != 1 {
		t.Fatalf("stable has the version before its promotion")
	}

	out := mustBerth(t, "promote", host+"/incubator/demo:1.0.0", host+"/stable/demo")
	for _, want := range []string{
		"Promoted " + host + "/incubator/demo:1.0.0 → " + host + "/stable/demo:1.0.0\n",
		"Digest: " + d1 + "\n",
		"Copied: " + signing.SignatureTag(digest.Digest(d1)) + "\n",
		"Copied: referrer sha256:",
		signing.SignatureArtifactType,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("promote output does not contain %q:\n%s", want, out)
		}
	}
	var res verifyResult
	decode(t, mustBerth(t, "verify", host+"/stable/demo:1.0.0", "--key", key.PublicFile, "--format", "json"), &res)
	kinds := map[string]bool{}
	for _, s := range res.Signatures {
		kinds[s.Kind] = kinds[s.Kind] || s.Verified
	}
	if !res.Verified || !kinds["tag"] || !kinds["referrer"] {
		t.Errorf("verify after promote: %+v", res)
	}
	var promoted promoteResult
	decode(t, mustBerth(t, "promote", host+"/incubator/demo@"+d1, host+"/stable/demo:1.0.0", "--format", "json"), &promoted)
	if promoted.Reference != host+"/stable/demo:1.0.0" || promoted.Digest != d1 || len(promoted.Tags) != 1 ||
		len(promoted.Referrers) != 1 || promoted.Referrers[0].ArtifactType != signing.SignatureArtifactType || promoted.Verified != nil {
		t.Errorf("promote json: %+v", promoted)
	}

	// The registry refuses an unsigned version, and one signed by another key.
	d2 := pushChart(t, dir, host, "incubator/demo", "2.0.0")
	wantFail(t, "Error: promote "+host+"/incubator/demo:2.0.0 → "+host+"/stable/demo: refused by the registry: stable/demo:2.0.0: "+d2+
		" has no signature verified by the trust policy for stable/* (no signature)", "promote", host+"/incubator/demo:2.0.0", host+"/stable/demo")
	mustBerth(t, "sign", host+"/incubator/demo:2.0.0", "--key", other.PrivateFile)
	wantFail(t, "refused by the registry: stable/demo:2.0.0: "+d2+" has no signature verified by the trust policy for stable/* (not signed by a key trusted for stable/demo",
		"promote", host+"/incubator/demo:2.0.0", host+"/stable/demo")

	// The client's policy refuses before copying.
	d3 := pushChart(t, dir, host, "incubator/demo", "3.0.0")
	policy := writePolicy(t, dir, "policy", "stable/*", true, key)
	wantFail(t, "Error: promote "+host+"/incubator/demo:3.0.0 → "+host+"/stable/demo: refused: no signature verified by the trust policy for stable/*: no signature",
		"promote", host+"/incubator/demo:3.0.0", host+"/stable/demo", "--trust-policy", policy)
	if _, err := orasRepo(host, "stable/demo").Resolve(context.Background(), d3); err == nil {
		t.Error("a promotion the client refused copied the manifest")
	}
	mustBerth(t, "sign", host+"/incubator/demo:3.0.0", "--key", key.PrivateFile)
	decode(t, mustBerth(t, "promote", host+"/incubator/demo:3.0.0", host+"/stable/demo", "--trust-policy", policy, "--format", "json"), &promoted)
	if promoted.Verified == nil || !*promoted.Verified || promoted.SignedBy != key.Key.ID {
		t.Errorf("promote json under a policy: %+v", promoted)
	}
}

func TestPushSignedCmd(t *testing.T) {
	dir := setup(t)
	t.Setenv(signing.PasswordEnv, testPassword)
	key := signingtest.NewKeyPair(t, testPassword)
	host := signingRegistry(t, key.PublicFile)
	chart := writeChart(t, dir, "demo", "1.0.0")

	wantFail(t, "Error: push "+host+"/stable/demo:1.0.0: denied: stable/demo:1.0.0: ", "push", chart, host+"/stable/demo")
	out := mustBerth(t, "push", chart, host+"/stable/demo", "--key", key.PrivateFile)
	if !strings.Contains(out, "Pushed "+host+"/stable/demo:1.0.0\nDigest: sha256:") || !strings.HasSuffix(out, "Signed: by "+key.Key.ID+"\n") {
		t.Errorf("push --key output:\n%s", out)
	}
	var pushed pushResult
	decode(t, mustBerth(t, "push", chart, host+"/stable/demo:1.0.0", "--key", key.PrivateFile, "--referrer", "--format", "json"), &pushed)
	if pushed.SignedBy != key.Key.ID || pushed.Reference != host+"/stable/demo:1.0.0" {
		t.Errorf("push --key json: %+v", pushed)
	}
	mustBerth(t, "verify", host+"/stable/demo:1.0.0", "--key", key.PublicFile)

	// A folder of versions: each signed before its tag.
	bundles := filepath.Join(dir, "bundles")
	writeBundles(t, bundles)
	var res struct{ Packages []pushedPackage }
	decode(t, mustBerth(t, "push", bundles, host+"/stable", "--key", key.PrivateFile, "--format", "json"), &res)
	if len(res.Packages) != 2 || res.Packages[0].SignedBy != key.Key.ID || res.Packages[1].SignedBy != key.Key.ID || res.Packages[1].Error != "" {
		t.Errorf("push of a folder with --key: %+v", res)
	}
	mustBerth(t, "verify", host+"/stable/etcd:0.9.4", "--key", key.PublicFile)
}

func TestSigningCmdErrors(t *testing.T) {
	dir := setup(t)
	host := signingRegistry(t, "")
	key := signingtest.NewKeyPair(t, testPassword)
	d := pushChart(t, dir, host, "charts/demo", "1.0.0")
	notPEM := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.key")
	ref := host + "/charts/demo:1.0.0"
	chart := writeChart(t, dir, "demo", "1.0.0")

	tests := []struct {
		env  string // COSIGN_PASSWORD, unset when empty
		args []string
		want string
	}{
		{testPassword, []string{"sign", ref}, "--key is required"},
		{testPassword, []string{"sign", ref, "--key", missing}, "--key " + missing + ": no such file or directory"},
		{testPassword, []string{"sign", ref, "--key", notPEM}, "--key " + notPEM + ": not a cosign private key"},
		{testPassword, []string{"sign", ref, "--key", key.PublicFile}, "--key " + key.PublicFile + ": not a cosign private key"},
		{"wrong", []string{"sign", ref, "--key", key.PrivateFile}, "--key " + key.PrivateFile + ": cannot decrypt the private key: wrong password (set COSIGN_PASSWORD)"},
		{"", []string{"sign", ref, "--key", key.PrivateFile}, "wrong password (set COSIGN_PASSWORD)"},
		{testPassword, []string{"sign", host + "/charts/demo:9.9.9", "--key", key.PrivateFile}, "Error: sign " + host + "/charts/demo:9.9.9: not found"},
		{testPassword, []string{"sign", host + "/charts/demo", "--key", key.PrivateFile}, "has no version"},
		{testPassword, []string{"sign", "kafka:1.0.0", "--key", key.PrivateFile}, "invalid reference"},
		{testPassword, []string{"sign", ref, "--key", key.PrivateFile, "-a", "novalue"}, `-a "novalue": want key=value`},
		{testPassword, []string{"verify", ref}, "no key to verify with"},
		{testPassword, []string{"verify", ref, "--key", missing}, "--key " + missing + ": no such file or directory"},
		{testPassword, []string{"verify", ref, "--key", notPEM}, "--key " + notPEM + ": not a PEM public key"},
		{testPassword, []string{"verify", ref, "--key", key.PrivateFile}, "not a PEM public key"},
		{testPassword, []string{"verify", ref, "--key", key.PublicFile, "--trust-policy", notPEM}, "give --key or --trust-policy, not both"},
		{testPassword, []string{"verify", host + "/Charts/demo:1.0.0", "--key", key.PublicFile}, `namespace "Charts" must be lower case`},
		{testPassword, []string{"verify", ref, "--trust-policy", notPEM}, "trust policy " + notPEM + ": yaml:"},
		{testPassword, []string{"pull", ref, "--key", missing}, "--key " + missing},
		{testPassword, []string{"pull", ref, "--key", key.PublicFile, "--trust-policy", notPEM}, "not both"},
		{testPassword, []string{"promote", ref}, "accepts 2 arg(s), received 1"},
		{testPassword, []string{"promote", host + "/charts/demo", host + "/stable/demo"}, `SRC "` + host + `/charts/demo" has no version`},
		{testPassword, []string{"promote", "charts/demo:1.0.0", host + "/stable/demo"}, "invalid reference"},
		{testPassword, []string{"promote", ref, "stable/demo"}, `DST: invalid reference "stable/demo"`},
		{testPassword, []string{"promote", ref, host + "/stable"}, "DST: invalid reference"},
		{testPassword, []string{"promote", ref, host + "/stable/demo@" + d}, "has a digest: want host[:port]/namespace/name[:version]"},
		{testPassword, []string{"promote", host + "/charts/demo@" + d, host + "/stable/demo"}, "has no version and SRC is given by digest"},
		{testPassword, []string{"promote", host + "/charts/demo:9.9.9", host + "/stable/demo"}, "promote " + host + "/charts/demo:9.9.9 → " + host + "/stable/demo: not found"},
		{testPassword, []string{"promote", ref, host + "/stable/demo", "--trust-policy", missing}, "trust policy: open " + missing},
		{testPassword, []string{"push", chart, host + "/charts/demo", "--referrer"}, "--referrer needs --key"},
		{testPassword, []string{"push", chart, host + "/charts/demo", "--tlog"}, "--tlog needs --key"},
		{testPassword, []string{"sign", ref, "--key", key.PrivateFile, "--tlog", "--rekor-url", ""}, "--rekor-url: empty"},
		{testPassword, []string{"sign", ref, "--key", key.PrivateFile, "--tlog", "--rekor-url", "http://127.0.0.1:1"}, "transparency log http://127.0.0.1:1: upload"},
		{testPassword, []string{"verify", ref, "--tlog-key", key.PublicFile}, "--tlog-key needs --key"},
		{testPassword, []string{"verify", ref, "--key", key.PublicFile, "--tlog-key", missing}, "--tlog-key: open " + missing},
		{testPassword, []string{"pull", ref, "--tlog-key", key.PublicFile}, "--tlog-key needs --key"},
		{testPassword, []string{"push", chart, host + "/charts/demo", "--key", missing}, "--key " + missing},
		{"wrong", []string{"push", chart, host + "/charts/demo", "--key", key.PrivateFile}, "wrong password"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if tt.env != "" {
				t.Setenv(signing.PasswordEnv, tt.env)
			}
			code, stdout, stderr := berth(t, tt.args...)
			if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "Error: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d\nstdout: %s\nstderr: %s\nwant stderr containing %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

func TestKeyPassword(t *testing.T) {
	setup(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd := newSignCmd()
	cmd.SetIn(r) // not a terminal: no prompt
	if pw, err := keyPassword(cmd, "cosign.key"); err != nil || pw != nil {
		t.Errorf("without %s, off a terminal: %q, %v; want no password", signing.PasswordEnv, pw, err)
	}
	t.Setenv(signing.PasswordEnv, "")
	if pw, err := keyPassword(cmd, "cosign.key"); err != nil || pw == nil || len(pw) != 0 {
		t.Errorf("%s set and empty: %q, %v", signing.PasswordEnv, pw, err)
	}
	t.Setenv(signing.PasswordEnv, testPassword)
	if pw, err := keyPassword(cmd, "cosign.key"); err != nil || string(pw) != testPassword {
		t.Errorf("%s set: %q, %v", signing.PasswordEnv, pw, err)
	}
}
