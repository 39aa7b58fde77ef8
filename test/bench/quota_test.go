package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-registry/berth/config"
)

func TestQuotaSize(t *testing.T) {
	o := options{packages: 300, packageKiB: 50}
	limit := quotaSize(o)
	run := int64(o.packages) * (int64(o.packageKiB)<<10 + packageOverhead)
	// A run starts at 99% and must end below 100%, with room to spare.
	if share := float64(run) / float64(limit); share > 0.0081 || share < 0.0079 {
		t.Errorf("a run pushes %.4f of the quota %d, want 0.008", share, limit)
	}
}

// TestQuotaConfig checks that berth reads the quota table's configuration
// as meant: the quota on every measured namespace, none on the fill's.
func TestQuotaConfig(t *testing.T) {
	const limit = 2_000_000_123
	file := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(file, []byte(quotaConfig(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]config.ByteSize{
		quotaPrefix + "-1-c1": limit, quotaPrefix + "-3-c8": limit, quotaPrefix + "-warmup": limit,
		fillNamespace: 0, "bench": 0,
	} {
		if got := c.NamespacePolicy(ns).Quota; got != want {
			t.Errorf("namespace %s: quota %d, want %d", ns, got, want)
		}
	}
}

func TestFillLayers(t *testing.T) {
	var seed [32]byte
	seed[5] = 7
	f := newFill(seed, maxFillLayer+12345)
	first, last := f.layer(0), f.layer(1)
	if len(first) != maxFillLayer || len(last) != 12345 {
		t.Errorf("layers of %d and %d bytes, want %d and 12345", len(first), len(last), maxFillLayer)
	}
	if !bytes.Equal(last, f.layer(1)) {
		t.Error("a layer made twice differs: targets would not hold the same bytes")
	}
	if bytes.Equal(first[:len(last)], last) {
		t.Error("two layers start alike")
	}
	if bytes.Equal(last, newFill([32]byte{}, maxFillLayer+12345).layer(1)) {
		t.Error("another seed makes the same layer")
	}
}
