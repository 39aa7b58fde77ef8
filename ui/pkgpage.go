package ui

import (
	"net/http"
	"net/url"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/internal/forwarded"
)

// packagePage is the data of a package's page.
type packagePage struct {
	Package *apiv1.Package
	// Latest is the latest version in full: its README, and what the
	// install commands need.
	Latest  *apiv1.Version
	Readme  readme
	Channel string
	// Channels link to the page of each channel.
	Channels []channelLink
	Graph    *graphDrawing
	Install  []snippet
}

func (p packagePage) title() string {
	return p.Package.Namespace + "/" + p.Package.Name
}

type channelLink struct {
	apiv1.Channel
	URL      string
	Selected bool
}

// packagePage serves GET /ui/packages/{namespace}/{name}[?channel=]: the
// package, its versions and channels, and the upgrade graph of one channel
// (the default one unless channel names another).
func (h *handler) packagePage(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := httpapi.PackagePath(r)
	if err != nil {
		return err
	}
	channel := r.URL.Query().Get("channel")
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	pkg, g, err := h.cat.Overview(r.Context(), access, ns, name, channel)
	if err != nil {
		return err
	}
	latest, err := h.cat.Version(r.Context(), access, ns, name, pkg.LatestVersion)
	if err != nil {
		return err
	}
	p := packagePage{Package: pkg, Latest: latest, Readme: renderReadme(latest.Metadata.Readme)}
	if g != nil {
		channel = g.Channel
		p.Channel, p.Graph = channel, layoutGraph(g)
	}
	for _, c := range pkg.Channels {
		u := packageURL(ns, name) + "?channel=" + url.QueryEscape(c.Name)
		p.Channels = append(p.Channels, channelLink{Channel: c, URL: u, Selected: c.Name == channel})
	}
	imgs, mirrors, err := h.siteImages(r.Context(), access, latest, httpapi.PullHost(forwarded.BaseURL(r, h.registryURL)))
	if err != nil {
		return err
	}
	p.Install = h.install(r, latest, channel, imgs, mirrors)
	h.render(w, r, http.StatusOK, "package", p)
	return nil
}
