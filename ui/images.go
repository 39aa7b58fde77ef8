package ui

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// imageRow is one image of a version as its page shows it: where the
// content names it, where it lives at this site, and what the installable
// check found there.
type imageRow struct {
	apiv1.VersionImage
	Check apiv1.ImageCheck
}

// imageRows joins the images of a version with their checks; inst is nil
// when none was made.
func imageRows(imgs *apiv1.VersionImages, inst *apiv1.Installable) []imageRow {
	checks := map[string]apiv1.ImageCheck{}
	if inst != nil {
		for _, c := range inst.Images {
			checks[c.Reference] = c
		}
	}
	rows := make([]imageRow, 0, len(imgs.Images))
	for _, im := range imgs.Images {
		rows = append(rows, imageRow{VersionImage: im, Check: checks[im.Reference]})
	}
	return rows
}

// siteImages reads what the install commands of v need: its images with
// their mirrors, and the mirrors of this site, for images no package names
// (the opm image of the OLM snippets). host is the registry as the viewer
// reaches it.
func (h *handler) siteImages(ctx context.Context, access catalog.Access, v *apiv1.Version, host string) (*apiv1.VersionImages, catalog.Mirrors, error) {
	imgs, err := h.cat.VersionImages(ctx, access, v.Namespace, v.Name, v.Version, host)
	if err != nil {
		return nil, nil, err
	}
	ms, err := h.cat.ImageMirrors(ctx)
	if err != nil {
		return nil, nil, err
	}
	return imgs, catalog.NewMirrors(ms), nil
}

// mirrored is where the image ref lives at this site, or ref itself when no
// mirror covers it.
func mirrored(m catalog.Mirrors, ref string) string {
	r, err := catalog.ParseImageRef(ref)
	if err != nil {
		return ref
	}
	if loc, ok := m.Location(r); ok {
		return loc.String()
	}
	return ref
}

// mirrorSets is the ImageDigestMirrorSet and ImageTagMirrorSet that make a
// cluster pull the mirrored images of v from where they live at this site:
// each source repository with its mirror repository, digest references in
// the first, tag references in the second. Empty when no image is mirrored.
func mirrorSets(v *apiv1.Version, imgs *apiv1.VersionImages) string {
	byDigest, byTag := map[string]string{}, map[string]string{}
	for _, im := range imgs.Images {
		if im.Mirror == "" {
			continue
		}
		loc, err := catalog.ParseImageRef(im.Mirror)
		if err != nil {
			continue
		}
		if im.Digest != "" {
			byDigest[im.Repository] = loc.Repository
		} else {
			byTag[im.Repository] = loc.Repository
		}
	}
	var b strings.Builder
	for _, set := range []struct {
		kind, field string
		repos       map[string]string
	}{
		{"ImageDigestMirrorSet", "imageDigestMirrors", byDigest},
		{"ImageTagMirrorSet", "imageTagMirrors", byTag},
	} {
		if len(set.repos) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: config.openshift.io/v1\nkind: %s\nmetadata:\n  name: berth-%s-%s\nspec:\n  %s:\n",
			set.kind, v.Namespace, v.Name, set.field)
		sources := make([]string, 0, len(set.repos))
		for s := range set.repos {
			sources = append(sources, s)
		}
		sort.Strings(sources)
		for _, s := range sources {
			fmt.Fprintf(&b, "  - source: %s\n    mirrors:\n    - %s\n", s, set.repos[s])
		}
	}
	return b.String()
}
