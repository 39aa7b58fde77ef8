package olm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/berth-registry/berth/catalog/graph"
)

// Schemas of the FBC documents RenderPackage writes.
const (
	SchemaPackage = "olm.package"
	SchemaChannel = "olm.channel"
	SchemaBundle  = "olm.bundle"
)

// The FBC documents, with the fields and field order of operator-registry's
// declcfg.Package, Channel, ChannelEntry and Bundle.
type (
	fbcPackage struct {
		Schema         string `json:"schema"`
		Name           string `json:"name"`
		DefaultChannel string `json:"defaultChannel"`
		Icon           *Icon  `json:"icon,omitempty"`
		Description    string `json:"description,omitempty"`
	}
	fbcChannel struct {
		Schema  string     `json:"schema"`
		Name    string     `json:"name"`
		Package string     `json:"package"`
		Entries []fbcEntry `json:"entries"`
	}
	fbcEntry struct {
		Name      string   `json:"name"`
		Replaces  string   `json:"replaces,omitempty"`
		Skips     []string `json:"skips,omitempty"`
		SkipRange string   `json:"skipRange,omitempty"`
	}
	fbcBundle struct {
		Schema        string         `json:"schema"`
		Name          string         `json:"name"`
		Package       string         `json:"package"`
		Image         string         `json:"image"`
		Properties    []Property     `json:"properties,omitempty"`
		RelatedImages []RelatedImage `json:"relatedImages,omitempty"`
	}
)

// RenderPackage writes the FBC of one package as JSON Lines (one compact
// JSON object per line), in the order opm writes a package: its olm.package
// document, its olm.channel documents sorted by name, its olm.bundle
// documents sorted by name. The same versions, given in any order, always
// give the same bytes.
//
// Only versions with a Bundle record take part: the channels, their members
// and heads are those catalog/graph computes from them (operator-registry's
// loader rules), and a version that is a member of no channel has no
// olm.bundle document, as opm requires. The default channel is the graph's,
// else the first channel by name; the package's icon and description are
// those of that channel's head, as opm migrate takes them. A bundle's image
// is host/namespace/name@digest, and its relatedImages list that image too,
// sorted by image as opm render sorts them. When two members share a CSV
// name, the first met (channels by name, newest first) stands for it.
//
// A package with no channel (no version with a bundle record lists one) has
// no valid FBC, since opm requires a default channel that exists: nothing is
// written for it, as for a package with no bundle records at all. Errors are
// those of w.
func RenderPackage(w io.Writer, host, namespace, name string, versions []Version) error {
	records := map[[2]string]*BundleRecord{}
	var gvs []graph.Version
	for _, v := range versions {
		if v.Bundle != nil && v.Metadata != nil {
			records[[2]string{v.Version, v.Digest}] = v.Bundle
			gvs = append(gvs, graph.Version{Version: v.Version, Digest: v.Digest, Metadata: v.Metadata})
		}
	}
	g := graph.Build(gvs)
	chans := g.Channels()
	if len(chans) == 0 {
		return nil
	}
	pkg := fbcPackage{Schema: SchemaPackage, Name: name, DefaultChannel: cmp.Or(g.DefaultChannel(), chans[0].Name)}
	var channels []fbcChannel
	bundles := map[string]*BundleRecord{} // by bundle name
	for _, ch := range chans {
		entries, err := g.Entries(ch.Name)
		if err != nil {
			return fmt.Errorf("%s/%s: channel %q: %w", namespace, name, ch.Name, err)
		}
		c := fbcChannel{Schema: SchemaChannel, Name: ch.Name, Package: name, Entries: []fbcEntry{}}
		for _, e := range entries {
			rec := records[[2]string{e.Version, e.Digest}]
			if rec == nil || (bundles[rec.Name] != nil && bundles[rec.Name] != rec) {
				continue
			}
			bundles[rec.Name] = rec
			c.Entries = append(c.Entries, fbcEntry{Name: rec.Name, Replaces: e.Replaces, Skips: e.Skips, SkipRange: e.SkipRange})
			if ch.Name == pkg.DefaultChannel && e.Version == ch.Head {
				pkg.Icon, pkg.Description = rec.Icon, rec.Description
			}
		}
		if len(c.Entries) > 0 {
			channels = append(channels, c)
		}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pkg); err != nil {
		return err
	}
	for _, c := range channels {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	for _, bname := range slices.Sorted(maps.Keys(bundles)) {
		rec := bundles[bname]
		image := host + "/" + namespace + "/" + name + "@" + rec.Digest
		b := fbcBundle{Schema: SchemaBundle, Name: rec.Name, Package: name, Image: image, Properties: rec.Properties, RelatedImages: relatedImages(rec.RelatedImages, image)}
		if err := enc.Encode(b); err != nil {
			return err
		}
	}
	return nil
}

// relatedImages returns a bundle's related images with its own image, which
// opm render adds unnamed unless the CSV lists it, sorted by image (then name).
func relatedImages(ris []RelatedImage, image string) []RelatedImage {
	out := slices.Clone(ris)
	if !slices.ContainsFunc(out, func(ri RelatedImage) bool { return ri.Image == image }) {
		out = append(out, RelatedImage{Image: image})
	}
	slices.SortStableFunc(out, func(a, b RelatedImage) int {
		return cmp.Or(strings.Compare(a.Image, b.Image), strings.Compare(a.Name, b.Name))
	})
	return out
}
