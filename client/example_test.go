package client_test

import (
	"context"
	"fmt"

	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgformat"
)

// Push a Helm chart as a berth package, then pull it back by version.
func Example() {
	host, stop := registrytest.Start(nil)
	defer stop()
	ctx := context.Background()

	pkg, err := pkgformat.New([]pkgformat.File{
		{Path: "Chart.yaml", Mode: 0o644, Data: []byte("apiVersion: v2\nname: hello\nversion: 1.0.0+build.7\n")},
		{Path: "templates/cm.yaml", Mode: 0o644, Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n")},
	}, pkgformat.Options{})
	if err != nil {
		panic(err)
	}
	art, err := pkg.Artifact()
	if err != nil {
		panic(err)
	}

	// The zero Options read credentials from the Docker config file; this
	// example uses an empty in-memory store instead.
	c, err := client.New(client.Options{Credentials: credentials.NewMemoryStore()})
	if err != nil {
		panic(err)
	}
	ref, err := client.ParseReference(host + "/charts/hello") // no version: the package's
	if err != nil {
		panic(err)
	}
	desc, err := c.Push(ctx, ref, art)
	if err != nil {
		panic(err)
	}
	fmt.Println("pushed", desc.Digest == art.ManifestDesc.Digest)

	ref.Tag = pkgformat.Tag("1.0.0+build.7")
	pulled, err := c.Pull(ctx, ref)
	if err != nil {
		panic(err)
	}
	md := pulled.Metadata
	fmt.Println(md.Name, md.Version, md.Format, len(pulled.Content) == len(art.Content))
	// Output:
	// pushed true
	// hello 1.0.0+build.7 helm true
}

func ExampleParseReference() {
	ref, err := client.ParseReference("localhost:5000/kudo/kafka:2.5.1_1.3.2")
	fmt.Println(ref.Registry, ref.Repository(), ref.Tag, err)

	_, err = client.ParseReference("localhost:5000/kafka")
	fmt.Println(err)
	// Output:
	// localhost:5000 kudo/kafka 2.5.1_1.3.2 <nil>
	// invalid reference "localhost:5000/kafka": missing namespace: want host[:port]/namespace/name[:version]
}
