package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog/apiv1"
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

// Search a berth server's catalog, then ask for a version it does not have.
func ExampleCatalog_Search() {
	// A stand-in for berth serve's catalog API.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
		switch r.URL.Path {
		case "/api/v1/packages":
			fmt.Fprint(w, `{"packages":[{"namespace":"kudo","name":"kafka","version":"2.5.1_1.3.2","format":"kudo",
				"description":"Apache Kafka"}],"facets":{"format":{"kudo":1}},"total":1,"next":""}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"errors":[{"code":"NOT_FOUND","message":"package kudo/kafka has no version 9.9.9"}]}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	// A loopback host:port is reached over plain HTTP; other hosts over HTTPS.
	catalog, err := client.NewCatalog(strings.TrimPrefix(srv.URL, "http://"), client.Options{Credentials: credentials.NewMemoryStore()})
	if err != nil {
		panic(err)
	}
	res, err := catalog.Search(ctx, client.SearchOptions{Query: "kafka", Format: pkgformat.KUDO})
	if err != nil {
		panic(err)
	}
	for _, p := range res.Packages {
		fmt.Printf("%s/%s %s: %s\n", p.Namespace, p.Name, p.Version, p.Description)
	}

	_, err = catalog.Version(ctx, "kudo", "kafka", "9.9.9")
	fmt.Println(errors.Is(err, client.ErrNotFound), err)
	// Output:
	// kudo/kafka 2.5.1_1.3.2: Apache Kafka
	// true kudo/kafka: not found: package kudo/kafka has no version 9.9.9
}
