package olm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/berth-registry/berth/pkgformat"
)

const sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// validBundle returns the metadata and bundle record of a version opm accepts.
func validBundle() (*pkgformat.Metadata, *BundleRecord) {
	md := &pkgformat.Metadata{Name: "demo", Version: "1.0.0", Format: pkgformat.OLM,
		Channels: []pkgformat.Channel{{Name: "stable", Replaces: "demo.v0.9.0", Skips: []string{"demo.v0.8.0"}, SkipRange: ">=0.5.0 <1.0.0"}, {Name: "original_40"}}}
	rec := &BundleRecord{Name: "demo.v1.0.0",
		Properties: []Property{
			{Type: propGVK, Value: json.RawMessage(`{"group":"demo.io","kind":"Demo","version":"v1"}`)},
			{Type: propPackage, Value: json.RawMessage(`{"packageName":"demo","version":"1.0.0"}`)},
			{Type: propPackageRequired, Value: json.RawMessage(`{"packageName":"other","versionRange":">=1.0.0"}`)},
			{Type: "example.com/custom", Value: json.RawMessage(`{"any":["json"]}`)},
			{Type: propCSVMetadata, Value: json.RawMessage(`{"annotations":{"a":"b"},"displayName":"Demo"}`)},
		},
		RelatedImages: []RelatedImage{{Name: "operator", Image: "docker.io/strimzi/operator@" + sha}, {Image: "quay.io/demo/op:v1"},
			{Image: "localhost:5000/demo/op"}, {Image: "busybox"}, {Image: ""}}}
	return md, rec
}

func TestValidateBundle(t *testing.T) {
	md, rec := validBundle()
	if err := ValidateBundle(md, rec); err != nil {
		t.Fatalf("a valid bundle: %v", err)
	}
	setProp := func(typ, value string) func(*pkgformat.Metadata, *BundleRecord) {
		return func(_ *pkgformat.Metadata, r *BundleRecord) {
			for i, p := range r.Properties {
				if p.Type == typ {
					r.Properties[i].Value = json.RawMessage(value)
					return
				}
			}
			r.Properties = append(r.Properties, Property{Type: typ, Value: json.RawMessage(value)})
		}
	}
	image := func(img string) func(*pkgformat.Metadata, *BundleRecord) {
		return func(_ *pkgformat.Metadata, r *BundleRecord) {
			r.RelatedImages = append(r.RelatedImages, RelatedImage{Name: "x", Image: img})
		}
	}
	channel := func(ch pkgformat.Channel) func(*pkgformat.Metadata, *BundleRecord) {
		return func(m *pkgformat.Metadata, _ *BundleRecord) { m.Channels = append(m.Channels, ch) }
	}
	for _, tc := range []struct {
		what   string
		change func(*pkgformat.Metadata, *BundleRecord)
		want   string
	}{
		{"strimzi 0.20.0's related image", image("docker.io/strimzi/operator@@" + sha), `relatedImages[5] (x): invalid image pull spec "docker.io/strimzi/operator@@sha256`},
		{"a related image with capitals", image("Strimzi/operator:1"), "repository name must be lowercase"},
		{"a related image with spaces", image("quay.io/demo/op :v1"), "invalid image pull spec"},
		{"a related image of a short digest", image("quay.io/demo/op@sha256:abc"), "invalid image pull spec"},
		{"a related image on an IPv6 host", image("[::1]:5000/demo/op"), "IPv6"},
		{"a related image too long", image("quay.io/" + strings.Repeat("a", 250)), "invalid image pull spec"},
		{"a skipRange blang cannot read", channel(pkgformat.Channel{Name: "fast", SkipRange: ">=1.0 <2.0"}), `channel "fast": skipRange ">=1.0 <2.0" is not a semver range`},
		{"a skipRange with a dangling ||", channel(pkgformat.Channel{Name: "fast", SkipRange: ">=1.0.0 ||"}), "skipRange"},
		{"an empty skip", channel(pkgformat.Channel{Name: "fast", Skips: []string{""}}), `channel "fast": skips[0] is empty`},
		{"a channel name with a newline", channel(pkgformat.Channel{Name: "stable\nfast"}), "channel name"},
		{"a channel name with HTML", channel(pkgformat.Channel{Name: "<b>x</b>"}), "channel name"},
		{"a package name with a dot", func(m *pkgformat.Metadata, r *BundleRecord) {
			m.Name = "demo.op"
			setProp(propPackage, `{"packageName":"demo.op","version":"1.0.0"}`)(m, r)
		}, `package name "demo.op" is not a DNS-1123 label`},
		{"a package name with an underscore", func(m *pkgformat.Metadata, r *BundleRecord) {
			m.Name = "demo_op"
			setProp(propPackage, `{"packageName":"demo_op","version":"1.0.0"}`)(m, r)
		}, "DNS-1123"},
		{"no bundle name", func(_ *pkgformat.Metadata, r *BundleRecord) { r.Name = "" }, "no metadata.name"},
		{"an olm.package.required of a number", setProp(propPackageRequired, `{"packageName":5}`), "properties[2] (olm.package.required): value"},
		{"an olm.gvk of a string", setProp(propGVK, `"demo.io/v1/Demo"`), "(olm.gvk): value"},
		{"an olm.gvk.required of a list", setProp(propGVKRequired, `[1]`), "(olm.gvk.required): value"},
		{"an olm.bundle.object not base64", setProp(propBundleObject, `{"data":"not base64!"}`), "(olm.bundle.object): value"},
		{"an olm.channel of a priority string", setProp(propChannel, `{"channelName":"x","priority":"high"}`), "(olm.channel): value"},
		{"an olm.csv.metadata of numeric annotations", setProp(propCSVMetadata, `{"annotations":{"a":1}}`), "(olm.csv.metadata): value"},
		{"a property of no value", func(_ *pkgformat.Metadata, r *BundleRecord) {
			r.Properties = append(r.Properties, Property{Type: "example.com/empty"})
		}, "(example.com/empty): value"},
		{"two olm.package properties", func(_ *pkgformat.Metadata, r *BundleRecord) {
			r.Properties = append(r.Properties, Property{Type: propPackage, Value: json.RawMessage(`{"packageName":"demo","version":"2.0.0"}`)})
		}, "2 olm.package properties"},
		{"an olm.package of another package", setProp(propPackage, `{"packageName":"other","version":"1.0.0"}`), `names package "other"`},
		{"a version that is not semver", setProp(propPackage, `{"packageName":"demo","version":"v1.0"}`), `version "v1.0" is not semver`},
		{"a release with a leading zero", setProp(propPackage, `{"packageName":"demo","version":"1.0.0","release":"01"}`), `release "01"`},
		{"a release too long", setProp(propPackage, `{"packageName":"demo","version":"1.0.0","release":"`+strings.Repeat("1", 21)+`"}`), "longer than 20"},
		{"a release and build metadata", setProp(propPackage, `{"packageName":"demo","version":"1.0.0+b","release":"1"}`), "build metadata and a release"},
		{"a release the bundle name lacks", setProp(propPackage, `{"packageName":"demo","version":"1.0.0","release":"1"}`), `opm requires "demo-v1.0.0-1"`},
	} {
		md, rec := validBundle()
		tc.change(md, rec)
		err := ValidateBundle(md, rec)
		if !errors.Is(err, pkgformat.ErrInvalid) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "is not valid for opm, so the namespace's catalog leaves it out") {
			t.Errorf("%s: %v, want an error containing %q", tc.what, err, tc.want)
		}
	}
	// A release opm accepts, with the bundle name it implies.
	md, rec = validBundle()
	setProp(propPackage, `{"packageName":"demo","version":"1.0.0","release":"alpha.1"}`)(md, rec)
	rec.Name = "demo-v1.0.0-alpha.1"
	if err := ValidateBundle(md, rec); err != nil {
		t.Errorf("a bundle with a release: %v", err)
	}
}
