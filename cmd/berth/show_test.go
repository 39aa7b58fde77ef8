package main

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

func digestOf(c string) string { return "sha256:" + strings.Repeat(c, 64) }

var (
	created = time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)

	testPackage = apiv1.Package{
		Namespace: "operators", Name: "etcd", Format: pkgformat.OLM, DisplayName: "etcd",
		Description: "Create and maintain highly-available etcd clusters", LatestVersion: "0.9.4", DefaultChannel: "singlenamespace-alpha",
		Maintainers: []pkgformat.Maintainer{{Name: "etcd Community", Email: "etcd-dev@googlegroups.com"}, {Name: "CoreOS", URL: "https://coreos.com"}},
		Versions: []apiv1.VersionSummary{
			{Version: "0.9.4", Digest: digestOf("a"), Created: &created, Channels: []string{"singlenamespace-alpha"}, Verified: true},
			{Version: "0.9.2", Digest: digestOf("b"), Channels: []string{"singlenamespace-alpha", "clusterwide-alpha"}},
		},
		Channels: []apiv1.Channel{
			{Name: "singlenamespace-alpha", Head: "0.9.4", Versions: []string{"0.9.4", "0.9.2"}},
			{Name: "clusterwide-alpha", Head: "0.9.2", Versions: []string{"0.9.2"}},
		},
		Verified:  true,
		Unindexed: []apiv1.Artifact{{Namespace: "operators", Name: "etcd", Tag: "latest", Digest: digestOf("c"), Status: apiv1.StatusIgnored, Reason: "a container image"}},
	}

	testVersion = apiv1.Version{
		Namespace: "kudo", Name: "kafka", Version: "2.5.1+1.3.2", Digest: digestOf("d"), Format: pkgformat.KUDO,
		PullReference: "localhost:5000/kudo/kafka@" + digestOf("d"),
		Content:       apiv1.Content{Digest: digestOf("e"), Size: 5 << 10, MediaType: "application/vnd.berth.package.content.v1.tar+gzip"},
		Metadata: pkgformat.Metadata{
			Name: "kafka", Version: "2.5.1+1.3.2", Format: pkgformat.KUDO, AppVersion: "2.5.1", Description: "Apache Kafka",
			Channels: []pkgformat.Channel{{Name: "stable"}}, DefaultChannel: "stable",
			ProvidedAPIs:   []pkgformat.API{{Group: "kafka.kudo.dev", Version: "v1", Kind: "Kafka"}},
			MinKubeVersion: "1.19.0", MaxKubeVersion: "1.29.0", License: "Apache-2.0",
		},
		Files: []pkgformat.FileInfo{{Path: "operator.yaml", Size: 1536}, {Path: "templates/statefulset.yaml", Size: 212}},
		Signatures: []apiv1.Signature{
			{Digest: digestOf("f"), KeyID: "release-key", Verified: true, Kind: "tag"},
			{Digest: digestOf("9"), KeyID: "unknown", Reason: "no trusted key matches", Kind: "referrer"},
		},
		Indexed: created, Verified: true,
	}

	testImages = apiv1.VersionImages{
		Namespace: "kudo", Name: "kafka", Version: "2.5.1+1.3.2", Incomplete: "a template does not render with its defaults",
		Images: []apiv1.VersionImage{
			{Reference: "docker.io/bitnami/kafka:2.5.1", Repository: "docker.io/bitnami/kafka", Tag: "2.5.1", Mutable: true,
				Found: []string{"templates/statefulset.yaml: StatefulSet kafka, container kafka"}, Mirror: "localhost:5000/mirror/bitnami/kafka:2.5.1"},
			{Reference: "quay.io/org/exporter@" + digestOf("7"), Repository: "quay.io/org/exporter", Digest: digestOf("7"), Found: []string{"params.yaml"}},
			{Reference: "quay.io/org/x@@y", Found: []string{"params.yaml"}, Problem: "invalid reference format"},
		},
	}
)

func TestShowCmdPackage(t *testing.T) {
	f := serveCatalog(t, map[string]any{"/packages/operators/etcd": testPackage})

	out := mustBerth(t, "show", "operators/etcd", "--server", f.host)
	want := `Name:            operators/etcd
Display name:    etcd
Format:          olm
Latest version:  0.9.4
Default channel: singlenamespace-alpha
Verified:        yes
Description:     Create and maintain highly-available etcd clusters
Maintainers:     etcd Community <etcd-dev@googlegroups.com>, CoreOS <https://coreos.com>

Channels:
NAME                    HEAD    VERSIONS
singlenamespace-alpha   0.9.4   0.9.4, 0.9.2
clusterwide-alpha       0.9.2   0.9.2

Versions:
VERSION   DIGEST                CREATED      CHANNELS
0.9.4     sha256:aaaaaaaaaaaa   2025-02-03   singlenamespace-alpha
0.9.2     sha256:bbbbbbbbbbbb   -            singlenamespace-alpha, clusterwide-alpha

Unindexed tags:
TAG      DIGEST                STATUS    REASON
latest   sha256:cccccccccccc   ignored   a container image
`
	if out != want {
		t.Errorf("show output:\n%s\nwant:\n%s", out, want)
	}

	var pkg apiv1.Package
	decode(t, mustBerth(t, "show", "operators/etcd", "--server", f.host, "--format", "json"), &pkg)
	if !reflect.DeepEqual(pkg, testPackage) {
		t.Errorf("show --format json = %+v, want %+v", pkg, testPackage)
	}

	code, stdout, stderr := berth(t, "show", "operators/nope", "--server", f.host)
	if want := "Error: operators/nope: not found: no such thing: /api/v1/packages/operators/nope\n"; code != 1 || stdout != "" || stderr != want {
		t.Errorf("show of a missing package: exit %d\nstdout: %s\nstderr: %s\nwant: %s", code, stdout, stderr, want)
	}
}

func TestShowCmdVersion(t *testing.T) {
	f := serveCatalog(t, map[string]any{
		"/packages/kudo/kafka/versions/2.5.1_1.3.2":        testVersion,
		"/packages/kudo/kafka/versions/2.5.1_1.3.2/images": testImages,
	})

	out := mustBerth(t, "show", "kudo/kafka:2.5.1+1.3.2", "--server", f.host)
	want := `Name:           kudo/kafka
Version:        2.5.1+1.3.2
Digest:         sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd
Pull reference: localhost:5000/kudo/kafka@sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd
Format:         kudo
Description:    Apache Kafka
App version:    2.5.1
Channels:       stable (default)
Provides:       kafka.kudo.dev/v1 Kafka
Min Kubernetes: 1.19.0
Max Kubernetes: 1.29.0
License:        Apache-2.0
Content size:   5.0 KiB (5120 bytes)
Verified:       yes

Files:
PATH                         SIZE
operator.yaml                1.5 KiB
templates/statefulset.yaml   212 B

Images:
REFERENCE                                                                                      MUTABLE   MIRROR                                      PROBLEM
docker.io/bitnami/kafka:2.5.1                                                                  tag       localhost:5000/mirror/bitnami/kafka:2.5.1   -
quay.io/org/exporter@sha256:7777777777777777777777777777777777777777777777777777777777777777   -         -                                           -
quay.io/org/x@@y                                                                               -         -                                           invalid reference format
Images may be incomplete: a template does not render with its defaults

Signatures:
DIGEST                KEY           KIND       VERIFIED   REASON
sha256:ffffffffffff   release-key   tag        yes        -
sha256:999999999999   unknown       referrer   no         no trusted key matches
`
	if out != want {
		t.Errorf("show output:\n%s\nwant:\n%s", out, want)
	}

	var v struct {
		apiv1.Version
		Images []apiv1.VersionImage `json:"images"`
	}
	decode(t, mustBerth(t, "show", "kudo/kafka:2.5.1_1.3.2", "--server", f.host, "--format", "json"), &v)
	if !reflect.DeepEqual(v.Version, testVersion) || !reflect.DeepEqual(v.Images, testImages.Images) {
		t.Errorf("show --format json = %+v, want %+v with images %+v", v, testVersion, testImages.Images)
	}
	const path = "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2"
	if got, want := f.requests(), []string{path, path + "/images", path, path + "/images"}; !reflect.DeepEqual(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}

	// A version without signatures says so.
	unsigned := testVersion
	unsigned.Signatures = nil
	f = serveCatalog(t, map[string]any{"/packages/kudo/kafka/versions/1.0.0": unsigned})
	out = mustBerth(t, "show", "kudo/kafka:1.0.0", "--server", f.host)
	if !strings.HasSuffix(out, "\nSignatures: none\n") {
		t.Errorf("show of an unsigned version:\n%s", out)
	}
	// A server without the images endpoint (404 once the version is found) says so.
	if !strings.Contains(out, "\nImages: not served by this server\n") {
		t.Errorf("show from a server without images:\n%s", out)
	}

	// Errors of the server keep its message.
	f = serveCatalog(t, map[string]any{"/packages/kudo/kafka/versions/9.9.9": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeAPIError(w, http.StatusNotFound, "NOT_FOUND", "package kudo/kafka has no version 9.9.9")
	})})
	code, _, stderr := berth(t, "show", "kudo/kafka:9.9.9", "--server", f.host)
	if want := "Error: kudo/kafka: not found: package kudo/kafka has no version 9.9.9\n"; code != 1 || stderr != want {
		t.Errorf("show of a missing version: exit %d, stderr %q, want %q", code, stderr, want)
	}
}

func TestShortList(t *testing.T) {
	items := strings.Fields("1 2 3 4 5 6 7 8 9 10")
	if got, want := shortList(items), "1, 2, 3, 4, 5, 6, 7, 8, … (+2)"; got != want {
		t.Errorf("shortList = %q, want %q", got, want)
	}
	if got := shortList(items[:8]); got != "1, 2, 3, 4, 5, 6, 7, 8" {
		t.Errorf("shortList = %q", got)
	}
}

func TestShowCmdPermissions(t *testing.T) {
	v := testVersion
	v.Signatures = nil
	v.Metadata.Permissions = &pkgformat.Permissions{
		Cluster: []pkgformat.PolicyRule{
			{APIGroups: []string{"kafka.kudo.dev"}, Resources: []string{"kafkas", "kafkas/status"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"get", "bind"}},
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		},
		Namespaced: []pkgformat.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"tls"}, Verbs: []string{"get"}},
			{APIGroups: []string{"", "apps"}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		},
	}
	f := serveCatalog(t, map[string]any{"/packages/kudo/kafka/versions/1.0.0": v})
	out := mustBerth(t, "show", "kudo/kafka:1.0.0", "--server", f.host)
	want := `
Permissions (rated critical):
SCOPE       RESOURCES                                             VERBS
namespace   secrets (tls)                                         get
namespace   configmaps, configmaps.apps                           create
cluster     kafkas.kafka.kudo.dev, kafkas/status.kafka.kudo.dev   get, list, watch
cluster     *.*                                                   *
cluster     clusterroles.rbac.authorization.k8s.io                get, bind
cluster     /metrics                                              get
CRITICAL: may do anything to any resource across the cluster
CRITICAL: may bind: can gain permissions beyond these rules
HIGH: may read Secrets in its namespace
MEDIUM: may create configmaps in its namespace
MEDIUM: may read kafkas, kafkas/status across the cluster
`
	if !strings.Contains(out, want+"\nSignatures: none\n") {
		t.Errorf("show output:\n%s\nwant the permissions:\n%s", out, want)
	}
}
