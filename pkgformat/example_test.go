package pkgformat_test

import (
	"fmt"
	"log"

	"github.com/berth-registry/berth/pkgformat"
)

// Load a Helm chart directory, print what berth reads from it and the tag and
// file name it is pushed under.
func ExampleLoad() {
	p, err := pkgformat.Load("testdata/hello-chart", pkgformat.Options{})
	if err != nil {
		log.Fatal(err)
	}
	md := p.Metadata
	fmt.Println(md.Name, md.Version, md.Format)
	fmt.Println("tag:", pkgformat.Tag(md.Version))
	fmt.Println("title:", pkgformat.ContentTitle(md.Name, md.Version))
	for _, api := range md.ProvidedAPIs {
		fmt.Printf("provides %s/%s %s\n", api.Group, api.Version, api.Kind)
	}
	// Output:
	// hello 1.2.3+build.5 helm
	// tag: 1.2.3_build.5
	// title: hello-1.2.3+build.5.tgz
	// provides hello.example.com/v1 Greeting
	// provides hello.example.com/v1alpha1 Greeting
}

// A plain bundle carries no name or version: they are given in Options.
func ExampleLoad_plain() {
	p, err := pkgformat.Load("testdata/plain-bundle", pkgformat.Options{Name: "widgets", Version: "0.1.0"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Metadata.Name, p.Metadata.Version, p.Metadata.Format, p.Metadata.RelatedImages)
	// Output:
	// widgets 0.1.0 plain [busybox:1.36 quay.io/example/widget-operator:v0.1.0]
}
