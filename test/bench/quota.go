package main

// The quota table (in `make bench`, or alone with -quota): pushes into a
// namespace at 99% of its quota against the same pushes into a namespace
// without one, each on a berth of its own that holds the same bytes.
//
// Each measured run pushes into a fresh namespace, quotaPrefix-<run>-c<c>,
// which one glob entry of the configuration gives the quota (a glob gives
// each namespace it matches that quota), so that every run starts at 99%
// and none pays for the one before. The harness fills each such namespace
// to 99% before its run by mounting, from the namespace fillNamespace, the
// same random layers it pushed there once, under one manifest: the usage
// counts each namespace's blobs on their own, so the namespace is charged
// the whole fill while storage holds it once.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"

	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/catalog/apiv1"
)

const (
	// quotaPrefix starts the namespaces of the measured runs; the glob
	// quotaPrefix-* has the quota.
	quotaPrefix = "bq"
	// fillNamespace holds the fill's layers once, outside the glob.
	fillNamespace = "bq.fill"
	// quotaFillPercent is how full of its quota the namespace is when each
	// measured run starts.
	quotaFillPercent = 99
	// quotaRunShare is the share of the quota one run pushes at most: the
	// namespace goes from 99% to at most 99.8%.
	quotaRunShare = 0.008
	// maxFillLayer bounds each layer of the fill, and the harness's memory.
	maxFillLayer = 64 << 20
	// fillOverhead is room left for the fill's manifest and config.
	fillOverhead = 16 << 10
	// packageOverhead bounds the bytes of a package beyond its content: its
	// config and its manifest.
	packageOverhead = 2 << 10
)

// quotaSize is the quota of each measured namespace: one run of o.packages
// pushes is at most quotaRunShare of it.
func quotaSize(o options) int64 {
	run := int64(o.packages) * (int64(o.packageKiB)<<10 + packageOverhead)
	return int64(float64(run) / quotaRunShare)
}

// quotaConfig is the configuration of the berth with quotas: limit bytes
// for every namespace quotaPrefix-*.
func quotaConfig(limit int64) string {
	return fmt.Sprintf("namespaces:\n  - name: %q\n    quota: %d\n", quotaPrefix+"-*", limit)
}

// runQuotaOnly builds berth and runs the quota table alone (-quota).
func runQuotaOnly(ctx context.Context, o options) error {
	root, err := os.MkdirTemp("", "berth-bench-quota-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	bin := filepath.Join(root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	logf("building berth")
	bins, err := build(ctx, bin)
	if err != nil {
		return err
	}
	return runQuota(ctx, o, bins.berth, root)
}

// runQuota starts, under root, a berth whose measured namespaces have a
// quota and one whose have none, and prints the quota table.
func runQuota(ctx context.Context, o options, bin, root string) error {
	limit := quotaSize(o)
	for _, name := range []string{"berth-quota", "berth-unlimited"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			return err
		}
	}
	quota, err := startBerthConfig(ctx, "berth+quota", bin, filepath.Join(root, "berth-quota"), quotaConfig(limit))
	if err != nil {
		return err
	}
	defer stop(quota)
	unlimited, err := startBerth(ctx, bin, filepath.Join(root, "berth-unlimited"))
	if err != nil {
		return err
	}
	defer stop(unlimited)
	logf("quota: berth with a quota of %s on each namespace %s-* on %s, without on %s",
		formatBytes(int(limit)), quotaPrefix, quota.addr, unlimited.addr)

	targets := []*target{newTarget(quota.name, quota.addr), newTarget(unlimited.name, unlimited.addr)}
	rows, err := measureQuota(ctx, o, targets, limit)
	if err != nil {
		return err
	}
	fmt.Println()
	printTable(os.Stdout, quotaTable(targets, rows, limit), o.verbose)
	return nil
}

// measureQuota pushes the fill to every target and warms it up, then
// measures the push rows at each of packageConcurrencies, each run in a
// fresh namespace filled to 99% of limit.
func measureQuota(ctx context.Context, o options, targets []*target, limit int64) ([]*row, error) {
	rnd := newRand()
	var seed [32]byte
	rnd.Read(seed[:])
	f := newFill(seed, limit*quotaFillPercent/100-fillOverhead)
	packages := func(ns string, count int) ([]pkg, error) {
		return newPackages(rnd, packageSet{prefix: ns, count: count, repos: min(o.repos, count), contentSize: o.packageKiB << 10})
	}
	for _, t := range targets {
		logf("quota: pushing the fill, %s, to %s", formatBytes(int(f.size)), t.name)
		if err := f.push(ctx, t); err != nil {
			return nil, err
		}
		pkgs, err := packages(quotaPrefix+"-warmup", 4*mixedConcurrency)
		if err != nil {
			return nil, err
		}
		if _, err := timeEach(ctx, t, pkgs, mixedConcurrency, pushOne(t, pkgs)); err != nil {
			return nil, err
		}
	}
	var rows []*row
	for _, c := range packageConcurrencies {
		r := newRow(fmt.Sprintf("%d packages push at %d%% of quota (c=%d)", o.packages, quotaFillPercent, c), "packages/s", packageRow, len(targets))
		rows = append(rows, r)
		err := measure(ctx, targets, o.packageRuns, func(ctx context.Context, t *target, rep int) ([]measurement, error) {
			ns := fmt.Sprintf("%s-%d-c%d", quotaPrefix, rep+1, c)
			pkgs, err := packages(ns, o.packages)
			if err != nil {
				return nil, err
			}
			if err := f.fill(ctx, t, ns, limit); err != nil {
				return nil, err
			}
			settle()
			push, err := timeEach(ctx, t, pkgs, c, pushOne(t, pkgs))
			if err != nil {
				return nil, err
			}
			return []measurement{{r, push}}, nil
		})
		if err != nil {
			return nil, err
		}
	}
	// What was measured is a quota only if it refuses a push over it.
	if err := checkRefused(ctx, targets[0], fmt.Sprintf("%s-1-c%d", quotaPrefix, packageConcurrencies[0]), limit); err != nil {
		return nil, err
	}
	return rows, nil
}

// checkRefused pushes into namespace ns of t a blob one byte larger than
// what its quota has left, and returns an error unless berth refuses it
// with 403 DENIED.
func checkRefused(ctx context.Context, t *target, ns string, limit int64) error {
	used, err := namespaceUsed(ctx, t, ns)
	if err != nil {
		return err
	}
	data := make([]byte, limit-used+1)
	rand.NewChaCha8([32]byte{9}).Read(data)
	err = t.repository(ns+"/over").Push(ctx, descriptor("application/octet-stream", data), bytes.NewReader(data))
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) && resp.StatusCode == http.StatusForbidden {
		logf("%s: a push of %s over the quota of namespace %s is refused: %v", t.name, formatBytes(len(data)), ns, err)
		return nil
	}
	return fmt.Errorf("%s: a push of %s into namespace %s, at %s of its %s quota, was not refused with 403 DENIED (%v): the quota table measured no quota",
		t.name, formatBytes(len(data)), ns, formatBytes(int(used)), formatBytes(int(limit)), err)
}

// pushOne pushes one of pkgs to t, as packageRound does.
func pushOne(t *target, pkgs []pkg) func(context.Context, *pkg) error {
	repos := t.repositories(pkgs)
	return func(ctx context.Context, p *pkg) error { return pushPackage(ctx, repos[p.repo], p) }
}

// fill is the content that fills a namespace: random layers of size bytes
// in all, each made again from seed when pushed, so that every target gets
// the same bytes and the harness holds one layer at a time.
type fill struct {
	seed   [32]byte
	size   int64
	layers []ocispec.Descriptor // known once pushed to the first target
}

func newFill(seed [32]byte, size int64) *fill { return &fill{seed: seed, size: size} }

// layer makes the i-th layer.
func (f *fill) layer(i int) []byte {
	n := min(f.size-int64(i)*maxFillLayer, maxFillLayer)
	seed := f.seed
	seed[0] ^= byte(i)
	seed[1] ^= byte(i >> 8)
	data := make([]byte, n)
	rand.NewChaCha8(seed).Read(data)
	return data
}

// source is the repository that holds the fill's layers.
func (f *fill) source() string { return fillNamespace + "/layers" }

// push pushes the fill's layers to t's source repository.
func (f *fill) push(ctx context.Context, t *target) error {
	repo := t.repository(f.source())
	for i := 0; int64(i)*maxFillLayer < f.size; i++ {
		data := f.layer(i)
		desc := descriptor("application/octet-stream", data)
		if i < len(f.layers) && f.layers[i].Digest != desc.Digest {
			return fmt.Errorf("fill layer %d: made %s, then %s", i, f.layers[i].Digest, desc.Digest)
		}
		if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil {
			return fmt.Errorf("%s: push fill layer %d (%s): %w", t.name, i, formatBytes(len(data)), err)
		}
		if i == len(f.layers) {
			f.layers = append(f.layers, desc)
		}
	}
	return nil
}

// fill mounts the fill's layers into namespace ns of t, pushes a manifest
// of them, and checks that the usage API then counts ns at 99% of limit.
func (f *fill) fill(ctx context.Context, t *target, ns string, limit int64) error {
	repo := t.repository(ns + "/fill")
	for _, l := range f.layers {
		if err := repo.Mount(ctx, l, f.source(), nil); err != nil {
			return fmt.Errorf("%s: mount fill layer %s into %s: %w", t.name, l.Digest, ns, err)
		}
	}
	config := []byte("{}")
	configDesc := descriptor(ocispec.MediaTypeEmptyJSON, config)
	if err := repo.Push(ctx, configDesc, bytes.NewReader(config)); err != nil {
		return fmt.Errorf("%s: push the fill's config into %s: %w", t.name, ns, err)
	}
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: "application/vnd.berth.bench.fill",
		Config:       configDesc,
		Layers:       f.layers,
	})
	if err != nil {
		return err
	}
	if err := repo.PushReference(ctx, descriptor(ocispec.MediaTypeImageManifest, manifest), bytes.NewReader(manifest), "fill"); err != nil {
		return fmt.Errorf("%s: push the fill's manifest into %s: %w", t.name, ns, err)
	}
	used, err := namespaceUsed(ctx, t, ns)
	if err != nil {
		return err
	}
	// Within a tenth of a percent of 99%.
	want := limit * quotaFillPercent / 100
	if d := used - want; d < -limit/1000 || d > limit/1000 {
		return fmt.Errorf("%s: after the fill, berth counts %s in namespace %s, not %d%% of %s (%s)",
			t.name, formatBytes(int(used)), ns, quotaFillPercent, formatBytes(int(limit)), formatBytes(int(want)))
	}
	logf("%s: namespace %s at %.2f%% of %s", t.name, ns, 100*float64(used)/float64(limit), formatBytes(int(limit)))
	return nil
}

// namespaceUsed is what namespace ns stores on t, as GET
// /api/v1/namespaces/{namespace}/usage says.
func namespaceUsed(ctx context.Context, t *target, ns string) (int64, error) {
	url := "http://" + t.addr + "/api/v1/namespaces/" + ns + "/usage"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", t.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("%s: GET %s: %w", t.name, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: GET %s: %s: %s (the quota table needs a berth that keeps its quota ledger and serves its usage)",
			t.name, url, resp.Status, bytes.TrimSpace(body))
	}
	var u apiv1.NamespaceUsage
	if err := json.Unmarshal(body, &u); err != nil {
		return 0, fmt.Errorf("%s: GET %s: %w", t.name, url, err)
	}
	return u.UsedBytes, nil
}

// quotaTable is the quota table: berth+quota, each run's namespace at 99%
// of its quota, against berth without a quota.
func quotaTable(targets []*target, rows []*row, limit int64) table {
	return parityTable(fmt.Sprintf("quota: each run's namespace at %d%% of a %s quota against no quota (both berths hold the same bytes)",
		quotaFillPercent, formatBytes(int(limit))), targets, rows)
}
