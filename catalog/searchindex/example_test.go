package searchindex_test

import (
	"fmt"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/pkgformat"
)

func ExampleIndex_Search() {
	ix := searchindex.New()
	ix.Set(
		&searchindex.Doc{Summary: apiv1.PackageSummary{
			Namespace: "community", Name: "strimzi", Format: pkgformat.OLM, Description: "Apache Kafka on Kubernetes.",
		}, Channels: []string{"stable"}},
		&searchindex.Doc{Summary: apiv1.PackageSummary{
			Namespace: "community", Name: "kafka-operator", Format: pkgformat.OLM, Description: "Runs clusters.",
		}, Channels: []string{"alpha"}},
		&searchindex.Doc{Summary: apiv1.PackageSummary{
			Namespace: "stable", Name: "redis", Format: pkgformat.Helm, Description: "An in-memory store.",
		}},
	)
	all := catalog.Access{All: true}
	// A name that starts with the text ranks above a full-text match.
	res, _ := ix.Search(catalog.Query{Text: "Kafka", Access: all})
	for _, p := range res.Packages {
		fmt.Println(p.Namespace + "/" + p.Name)
	}
	fmt.Println(res.Total, res.Facets.Format)
	// Filters alone list by name.
	res, _ = ix.Search(catalog.Query{Channel: "stable", Access: all})
	fmt.Println(res.Packages[0].Name, res.Total)
	// Output:
	// community/kafka-operator
	// community/strimzi
	// 2 map[olm:2]
	// strimzi 1
}
