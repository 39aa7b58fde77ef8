package catalog

import "github.com/berth-registry/berth/pkgformat"

// IndexVersion is the version of what indexing derives from a package. It
// goes up whenever the indexer derives something new or derives it
// differently, and every stored version records the one it was read with
// (Entry.IndexVersion), so that the versions read by an older berth are
// read again in the background after an upgrade (reindex.go).
//
//   - 1: the versions stored before index versions were recorded.
//   - 2: the alm-examples of an OLM version's CSV (Entry.Examples), and
//     the permissions Helm templates ask for.
const IndexVersion = 2

// Summary is the part of a version's metadata that describing its package
// needs (Package, Overview, Graph, Upgrades): the versions table, the
// channels and upgrade graph, the permission ratings of the graph's nodes
// and edges, and the package's header from its latest version. Stores keep
// it beside the whole metadata, so that a package with many versions is
// described without decoding every version's readme, files and images.
func Summary(md *pkgformat.Metadata) *pkgformat.Metadata {
	if md == nil {
		return nil
	}
	return &pkgformat.Metadata{
		Format: md.Format, AppVersion: md.AppVersion, CSVName: md.CSVName,
		DisplayName: md.DisplayName, Description: md.Description, Maintainers: md.Maintainers,
		Channels: md.Channels, DefaultChannel: md.DefaultChannel, Permissions: md.Permissions, Created: md.Created,
	}
}
