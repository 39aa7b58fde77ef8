package sqlite

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// A deterministic catalog of operator packages for the benchmarks: product
// names drawn with a Zipf skew (a few products have many packages, most have
// few), generic words that appear everywhere, CRD kinds derived from the
// product, channels, images (the package's controller, by tag, and its
// product's operand, shared by every package of the product), and
// versionsPerPackage versions per package.

var products = strings.Fields(`kafka postgres redis mysql mongodb elasticsearch prometheus grafana etcd cassandra
zookeeper nginx rabbitmq nats pulsar minio ceph rook longhorn velero istio linkerd envoy traefik consul vault keycloak
dex jaeger loki tempo thanos cortex mimir influxdb timescale clickhouse druid pinot trino presto hive hadoop hbase kudu
couchdb couchbase arangodb neo4j dgraph memcached hazelcast ignite infinispan solr opensearch kibana logstash fluentd
fluentbit vector splunk datadog dynatrace falco kyverno gatekeeper trivy harbor quay nexus gitea gitlab sonarqube
keptn crossplane argo tekton jenkins flux airflow spark flink jupyter kubeflow seldon ray dask cockroachdb yugabyte
tidb vitess percona mariadb galera patroni pgbouncer pgpool scylla aerospike foundationdb tikv openebs portworx
strimzi camel kogito infinispan keda knative openfaas dapr temporal cadence nifi superset metabase redash mattermost
rocketchat nextcloud wordpress drupal ghost joomla magento odoo moodle mediawiki jitsi matrix synapse sentry posthog
plausible matomo umami unleash flagsmith cert acme coredns externaldns metallb cilium calico multus kubevirt`)

var generic = strings.Fields(`operator kubernetes cluster manage deploy install automated open source cloud native
application service highly available scalable distributed database storage monitoring backup restore upgrade
lifecycle management secure production ready simple fast lightweight enterprise platform observability metrics
logging tracing streaming messaging queue cache search analytics data pipeline workflow controller custom resource
configuration replication failover persistent volume snapshot tls certificates authentication authorization
multi tenant namespace helm chart bundle provides runs on top of and for with the a`)

var (
	suffixes   = []string{"operator", "operator", "controller", "exporter", "ha", "cluster", "standalone", "proxy", "backup", "dashboard"}
	kindSuffix = []string{"Cluster", "Backup", "Restore", "User", "Topic", "Instance", "Connector", "Policy", "Database", "Replica"}
	channelSet = []string{"alpha", "beta", "fast", "candidate"}
	firstNames = strings.Fields(`Ada Alan Grace Linus Ken Rob Barbara Margaret Dennis Bjarne Guido James Anders Radia Frances Leslie`)
	lastNames  = strings.Fields(`Lovelace Turing Hopper Torvalds Thompson Pike Liskov Hamilton Ritchie Stroustrup Rossum Gosling Hejlsberg Perlman Allen Lamport`)
	genNS      = []string{"stable", "incubator", "community", "certified", "redhat", "bitnami", "kudo", "acme", "platform", "data"}
)

const versionsPerPackage = 5

// genEntries returns versionsPerPackage indexed entries for each of packages
// distinct packages, in a deterministic shuffled order.
func genEntries(packages int) []*catalog.Entry {
	r := rand.New(rand.NewPCG(7, 11))
	zipf := rand.NewZipf(r, 1.1, 10, uint64(len(products)-1))
	seen := map[string]bool{}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []*catalog.Entry
	for len(seen) < packages {
		product := products[zipf.Uint64()]
		name := product + "-" + suffixes[r.IntN(len(suffixes))]
		if r.IntN(2) == 0 {
			name = product + "-" + products[r.IntN(len(products))] + "-" + suffixes[r.IntN(len(suffixes))]
		}
		ns := genNS[r.IntN(len(genNS))]
		if seen[ns+"/"+name] {
			continue
		}
		seen[ns+"/"+name] = true
		format := []pkgformat.Format{pkgformat.Helm, pkgformat.Helm, pkgformat.Helm, pkgformat.Helm, pkgformat.OLM,
			pkgformat.OLM, pkgformat.OLM, pkgformat.KUDO, pkgformat.Plain, pkgformat.Plain}[r.IntN(10)]
		title := strings.ToUpper(product[:1]) + product[1:]
		desc := []string{title}
		for range 8 + r.IntN(16) {
			if r.IntN(5) == 0 {
				desc = append(desc, products[r.IntN(len(products))])
			} else {
				desc = append(desc, generic[r.IntN(len(generic))])
			}
		}
		keywords := []string{product, generic[r.IntN(len(generic))], generic[r.IntN(len(generic))]}
		var maintainers []pkgformat.Maintainer
		for range 1 + r.IntN(2) {
			maintainers = append(maintainers, pkgformat.Maintainer{
				Name: firstNames[r.IntN(len(firstNames))] + " " + lastNames[r.IntN(len(lastNames))]})
		}
		var apis []pkgformat.API
		for _, k := range r.Perm(len(kindSuffix))[:1+r.IntN(4)] {
			apis = append(apis, pkgformat.API{Group: product + ".example.io", Version: "v1", Kind: title + kindSuffix[k]})
		}
		channels := []string{"stable"}
		if r.IntN(3) == 0 {
			channels = append(channels, channelSet[r.IntN(len(channelSet))])
		}
		minKube := fmt.Sprintf("1.%d", 16+r.IntN(12))
		for v := range versionsPerPackage {
			version := fmt.Sprintf("%d.%d.%d", 1+v/3, v%3, r.IntN(4))
			if v == versionsPerPackage-1 && r.IntN(4) == 0 {
				version = fmt.Sprintf("%d.0.0-rc.1", 2+v/3)
			}
			if format == pkgformat.KUDO {
				version = fmt.Sprintf("3.%d.0_0.%d.0", v, v+1)
			}
			created := base.Add(time.Duration(len(out)) * time.Minute)
			var chs []pkgformat.Channel
			for _, c := range channels {
				chs = append(chs, pkgformat.Channel{Name: c})
			}
			appVersion := fmt.Sprintf("%d.%d", 1+r.IntN(9), r.IntN(20))
			images := []pkgformat.Image{
				{Reference: "docker.io/library/" + product + ":" + appVersion, Found: []string{"operand"}, Mutable: true},
				{Reference: "quay.io/" + ns + "/" + name + ":" + version, Found: []string{"controller"}, Mutable: true},
			}
			md := &pkgformat.Metadata{
				SchemaVersion: pkgformat.MetadataSchemaVersion, Name: name, Version: version, Format: format,
				AppVersion: appVersion, DisplayName: title + " " + suffixes[r.IntN(len(suffixes))], Images: images,
				Description: strings.Join(desc, " "), Keywords: keywords, Maintainers: maintainers,
				Channels: chs, DefaultChannel: "stable", ProvidedAPIs: apis, MinKubeVersion: minKube,
				Created: &created, Files: []pkgformat.FileInfo{{Path: "README.md", Size: 1200}, {Path: "manifests/crd.yaml", Size: 8000}},
			}
			out = append(out, &catalog.Entry{
				Namespace: ns, Name: name, Tag: version, Digest: fmt.Sprintf("sha256:%064x", len(out)),
				Status: apiv1.StatusIndexed, Indexed: created, Metadata: md, Verified: r.IntN(3) == 0,
				Content: apiv1.Content{Digest: fmt.Sprintf("sha256:%064x", len(out)+1<<40), Size: 9200, MediaType: pkgformat.ContentMediaType},
				Files:   []catalog.FileEntry{{Path: "README.md", Size: 1200, Offset: 512}, {Path: "manifests/crd.yaml", Size: 8000, Offset: 2048}},
			})
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
