// Package deploy holds what runs berth somewhere other than a developer's
// machine (docs/deploy.md): the container image (Dockerfile), the Helm chart
// (helm/berth), plain Kubernetes manifests for a single node (manifests/) and
// a Grafana dashboard (grafana/berth.json). It has no Go code of its own; its
// tests lint and render the chart with the Helm pinned in go.mod, check what
// the chart and the manifests run — image, command, probes, ports, mounts,
// security context, and a configuration berth accepts — and check that every
// metric the dashboard queries is one a running berth serves.
package deploy
