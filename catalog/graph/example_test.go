package graph_test

import (
	"fmt"
	"log"

	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/pkgformat"
)

// The upgrade graph of an OLM package: 0.9.4 replaces 0.9.2, which replaces
// 0.9.0; 0.9.2 is stored last, but the graph does not care.
func ExampleBuild() {
	version := func(v, replaces string) graph.Version {
		md := &pkgformat.Metadata{Format: pkgformat.OLM, Version: v, CSVName: "etcdoperator.v" + v, DefaultChannel: "alpha",
			Channels: []pkgformat.Channel{{Name: "alpha", Replaces: replaces}}}
		return graph.Version{Version: v, Digest: "sha256:…", Metadata: md}
	}
	g := graph.Build([]graph.Version{
		version("0.9.0", ""),
		version("0.9.4", "etcdoperator.v0.9.2"),
		version("0.9.2", "etcdoperator.v0.9.0"),
	})
	for _, c := range g.Channels() {
		fmt.Println(c.Name, "head", c.Head, c.Versions)
	}
	u, err := g.Upgrades("", "0.9.0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("from", u.From, "in", u.Channel, "next", u.Next, "path", u.Path)
	// Output:
	// alpha head 0.9.4 [0.9.4 0.9.2 0.9.0]
	// from 0.9.0 in alpha next [0.9.2] path [0.9.2 0.9.4]
}

// An OLM channel holds its head and what its replaces chain reaches,
// whichever channels those versions list: stable lists 1.2.0 alone, which
// replaces 1.1.0 of alpha. Entries are the channel's olm.channel entries.
func ExampleGraph_Entries() {
	version := func(v, channel, replaces string) graph.Version {
		md := &pkgformat.Metadata{Format: pkgformat.OLM, Version: v, CSVName: "op.v" + v, DefaultChannel: "stable",
			Channels: []pkgformat.Channel{{Name: channel, Replaces: replaces}}}
		return graph.Version{Version: v, Digest: "sha256:…", Metadata: md}
	}
	g := graph.Build([]graph.Version{
		version("1.0.0", "alpha", ""),
		version("1.1.0", "alpha", "op.v1.0.0"),
		version("1.2.0", "stable", "op.v1.1.0"),
	})
	entries, err := g.Entries("stable")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Printf("%s replaces %q\n", e.CSVName, e.Replaces)
	}
	// Output:
	// op.v1.2.0 replaces "op.v1.1.0"
	// op.v1.1.0 replaces "op.v1.0.0"
	// op.v1.0.0 replaces ""
}

// In KUDO, Helm and plain packages any later version is a direct upgrade.
func ExampleGraph_Upgrades_semver() {
	var versions []graph.Version
	for _, v := range []string{"2.5.1_1.3.2", "2.4.0_1.2.0", "2.5.0_1.3.1"} {
		versions = append(versions, graph.Version{Version: v, Metadata: &pkgformat.Metadata{Format: pkgformat.KUDO}})
	}
	u, err := graph.Build(versions).Upgrades("", "2.4.0_1.2.0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(u.Channel, "next", u.Next, "path", u.Path)
	// Output:
	// default next [2.5.1_1.3.2 2.5.0_1.3.1] path [2.5.1_1.3.2]
}
