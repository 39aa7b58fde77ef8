package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/signing"
)

// signResult is the --format json output of berth sign.
type signResult struct {
	// Reference is the version signed, by digest.
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	// ResolvedFrom is the version tag REF gave, when it gave one.
	ResolvedFrom string `json:"resolvedFrom,omitempty"`
	// KeyID is the fingerprint of the signing key's public half.
	KeyID string `json:"keyId"`
	// Kind is how the signature is stored: tag (sha256-<hex>.sig) or referrer.
	Kind string `json:"kind"`
}

// signFlags are the flags that say how to sign: the private key, where the
// signature goes and what it carries.
type signFlags struct {
	key         string
	referrer    bool
	annotations []string
	tlog        bool
	rekorURL    string
}

// defaultRekorURL is the public Rekor instance, as cosign's default.
const defaultRekorURL = "https://rekor.sigstore.dev"

// add registers the flags on cmd; keyUsage describes --key.
func (f *signFlags) add(cmd *cobra.Command, keyUsage string, withAnnotations bool) {
	cmd.Flags().StringVar(&f.key, "key", "", keyUsage)
	cmd.Flags().BoolVar(&f.referrer, "referrer", false,
		"store the signature as an OCI 1.1 referrer of the version instead of under cosign's sha256-<hex>.sig tag")
	if withAnnotations {
		cmd.Flags().StringArrayVarP(&f.annotations, "annotation", "a", nil, "`key=value` signed with the payload, as cosign sign -a (repeatable)")
	}
	cmd.Flags().BoolVar(&f.tlog, "tlog", false, "also record the signature in the transparency log at --rekor-url (default: offline, no log)")
	cmd.Flags().StringVar(&f.rekorURL, "rekor-url", defaultRekorURL, "the transparency log (Rekor) `URL` --tlog records in")
}

// options returns the client's sign options.
func (f *signFlags) options() (client.SignOptions, error) {
	opts := client.SignOptions{Referrer: f.referrer}
	if f.tlog {
		if f.rekorURL == "" {
			return opts, fmt.Errorf("--rekor-url: empty; --tlog needs the transparency log's URL")
		}
		opts.TLog = f.rekorURL
	}
	for _, a := range f.annotations {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return opts, fmt.Errorf("-a %q: want key=value", a)
		}
		if opts.Annotations == nil {
			opts.Annotations = map[string]string{}
		}
		opts.Annotations[k] = v
	}
	return opts, nil
}

// kind is how the signature is stored.
func (f *signFlags) kind() signing.Kind {
	if f.referrer {
		return signing.KindReferrer
	}
	return signing.KindTag
}

// newSignCmd returns `berth sign REF --key FILE`.
func newSignCmd() *cobra.Command {
	var (
		remote remoteFlags
		sign   signFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "sign REF --key FILE",
		Short: "Sign a package version with a cosign key",
		Long: `Sign a package version with a cosign private key, as cosign sign --key does.
The signature is always made for the version's digest: a REF by version
(host[:port]/namespace/name:version) is resolved first, and the digest signed
is printed. It is stored under cosign's tag (sha256-<hex>.sig) or, with
--referrer, as an OCI 1.1 referrer of the version; cosign verify and berth
verify read both.

The key is a cosign private key (cosign generate-key-pair writes cosign.key).
Its password is read from $COSIGN_PASSWORD; when that is unset and stdin is a
terminal, it is asked for; otherwise it is empty.

Signing is offline by default: nothing is written to a transparency log
(verify such signatures with cosign verify --insecure-ignore-tlog). With
--tlog the signature is also recorded in the transparency log at --rekor-url
(Rekor's API), and the log's entry is attached to it, as cosign sign does.`,
		Example: `  berth sign localhost:5000/incubator/kafka:1.3.2 --key cosign.key
  COSIGN_PASSWORD=... berth sign registry.example.com/stable/kafka@sha256:... --key cosign.key --referrer
  berth sign localhost:5000/incubator/kafka:1.3.2 --key cosign.key -a ci=build-42 --format json
  berth sign registry.example.com/stable/kafka:1.3.2 --key cosign.key --tlog --rekor-url https://rekor.internal.example.com`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ref, err := remote.versionRef(cmd, args[0])
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("key") {
				return fmt.Errorf("--key is required: the cosign private key file (cosign.key) to sign with")
			}
			opts, err := sign.options()
			if err != nil {
				return err
			}
			signer, err := loadSigner(cmd, sign.key)
			if err != nil {
				return err
			}
			d, err := c.Sign(cmd.Context(), ref, signer, opts)
			if err != nil {
				return err
			}
			signed := client.Reference{Registry: ref.Registry, Namespace: ref.Namespace, Name: ref.Name, Digest: d}
			res := signResult{Reference: signed.String(), Digest: d.String(), KeyID: signer.KeyID, Kind: string(sign.kind())}
			if ref.Digest == "" {
				res.ResolvedFrom = ref.Tag
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			if res.ResolvedFrom != "" {
				fmt.Fprintf(w, "Signed %s (resolved from %s)\n", res.Reference, res.ResolvedFrom)
			} else {
				fmt.Fprintf(w, "Signed %s\n", res.Reference)
			}
			t := newTable(w)
			t.row("Key", res.KeyID)
			if sign.referrer {
				t.row("Stored as", "referrer")
			} else {
				t.row("Stored as", "tag "+signing.SignatureTag(d))
			}
			return t.flush()
		},
	}
	remote.add(cmd)
	sign.add(cmd, "cosign private key `FILE` to sign with (required)", true)
	addFormatFlag(cmd, &format)
	return cmd
}
