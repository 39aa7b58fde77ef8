package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// VersionImages returns the container images a version runs, as the
// server derived them from its content, each with where it lives at the
// server's site when a mirror of its repository is recorded
// (GET …/versions/{version}/images).
func (c *Catalog) VersionImages(ctx context.Context, namespace, name, version string) (*apiv1.VersionImages, error) {
	var res apiv1.VersionImages
	if err := c.versionGet(ctx, namespace, name, version, "/images", &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Installable says whether everything a version needs to install is at
// the server's site (its images at their mirrors) and its signatures
// verify (GET …/versions/{version}/installable).
func (c *Catalog) Installable(ctx context.Context, namespace, name, version string) (*apiv1.Installable, error) {
	var res apiv1.Installable
	if err := c.versionGet(ctx, namespace, name, version, "/installable", &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ImageMirrors returns where the server records the images of source
// repositories live at its site (GET /api/v1/image-mirrors).
func (c *Catalog) ImageMirrors(ctx context.Context) (*apiv1.ImageMirrors, error) {
	var res apiv1.ImageMirrors
	if err := c.get(ctx, "image mirrors", "/image-mirrors", nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SetImageMirrors adds mirrors to those the server records, replacing any
// with the same source (PUT /api/v1/image-mirrors), and returns them all.
// It needs admin on everything.
func (c *Catalog) SetImageMirrors(ctx context.Context, mirrors apiv1.ImageMirrors) (*apiv1.ImageMirrors, error) {
	var res apiv1.ImageMirrors
	if err := c.do(ctx, "image mirrors", http.MethodPut, "/image-mirrors", nil, mirrors, http.StatusOK, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// versionGet reads the document at suffix under a version's path.
func (c *Catalog) versionGet(ctx context.Context, namespace, name, version, suffix string, out any) error {
	op, path, err := packagePath(namespace, name)
	if err != nil {
		return err
	}
	if err := pkgformat.ValidVersion(version); err != nil {
		return fmt.Errorf("%s: %w: %w", op, ErrInvalid, err)
	}
	return c.get(ctx, op, path+"/versions/"+url.PathEscape(pkgformat.Tag(version))+suffix, nil, out)
}
