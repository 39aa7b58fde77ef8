package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// Sign a version by its tag, verify it, and pull it under a trust policy
// that requires a signature by the key.
func ExampleClient_Sign() {
	host, stop, err := registrytest.StartBerth(registry.Options{}, nil)
	if err != nil {
		panic(err)
	}
	defer stop()
	ctx := context.Background()

	// A cosign key pair, as cosign generate-key-pair writes it: cosign.key,
	// encrypted with a password, and cosign.pub.
	dir, err := os.MkdirTemp("", "keys")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	keys, err := signingtest.WriteKeyPair(dir, "password")
	if err != nil {
		panic(err)
	}
	signer, err := signing.LoadSigner(keys.PrivateFile, []byte("password"))
	if err != nil {
		panic(err)
	}
	key, err := signing.LoadPublicKey(keys.PublicFile)
	if err != nil {
		panic(err)
	}

	pkg, err := pkgformat.New([]pkgformat.File{
		{Path: "Chart.yaml", Mode: 0o644, Data: []byte("apiVersion: v2\nname: hello\nversion: 1.0.0\n")},
	}, pkgformat.Options{})
	if err != nil {
		panic(err)
	}
	art, err := pkg.Artifact()
	if err != nil {
		panic(err)
	}
	policy := signing.NewPolicyOf(signing.Rule{Repositories: []string{"stable/*"}, Keys: []signing.Key{key}, Require: true})
	c, err := client.New(client.Options{Credentials: credentials.NewMemoryStore(), TrustPolicy: policy})
	if err != nil {
		panic(err)
	}
	ref, err := client.ParseReference(host + "/stable/hello:1.0.0")
	if err != nil {
		panic(err)
	}
	if _, err := c.Push(ctx, ref, art); err != nil {
		panic(err)
	}

	_, err = c.Pull(ctx, ref)
	fmt.Println("unsigned:", errors.Is(err, client.ErrUnverified))

	d, err := c.Sign(ctx, ref, signer, client.SignOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("signed the digest:", d == art.ManifestDesc.Digest)

	report, err := c.VerifyKeys(ctx, ref, []signing.Key{key})
	if err != nil {
		panic(err)
	}
	by, _ := report.VerifiedBy()
	fmt.Println("verified:", report.Verified(), by.Kind, by.KeyID == signer.KeyID)

	pulled, err := c.Pull(ctx, ref)
	if err != nil {
		panic(err)
	}
	fmt.Println("pulled:", pulled.Metadata.Name, pulled.Signatures.Verified())
	// Output:
	// unsigned: true
	// signed the digest: true
	// verified: true tag true
	// pulled: hello true
}
