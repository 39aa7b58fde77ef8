package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/signing"
)

// trustPolicyEnv names the client trust policy file when --trust-policy is
// not given.
const trustPolicyEnv = "BERTH_TRUST_POLICY"

// defaultTrustPolicy is the client trust policy file used, when it exists,
// if neither --trust-policy nor BERTH_TRUST_POLICY names one:
// <user config dir>/berth/trust.yaml. It is "" when the user config
// directory is unknown.
func defaultTrustPolicy() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "berth", "trust.yaml")
}

// trustFlags are --trust-policy and --key (public keys) of the commands
// that verify.
type trustFlags struct {
	policyFile string
	keys       []string
	tlogKeys   []string
}

// addPolicy registers --trust-policy on cmd.
func (f *trustFlags) addPolicy(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.policyFile, "trust-policy", "",
		"client trust policy `FILE` (YAML: policies: [{repositories, keys, require}]; default $"+trustPolicyEnv+
			", else <config dir>/berth/trust.yaml if it exists)")
}

// addKeys registers --key and --tlog-key, repeatable, on cmd.
func (f *trustFlags) addKeys(cmd *cobra.Command, usage string) {
	cmd.Flags().StringArrayVar(&f.keys, "key", nil, usage)
	cmd.Flags().StringArrayVar(&f.tlogKeys, "tlog-key", nil,
		"with --key: also require a transparency log entry signed by this log's public key `FILE` (Rekor's key; repeatable: any of them)")
}

// rule is the trust --key and --tlog-key give for repo.
func (f *trustFlags) rule(repo string, require bool) (signing.Rule, error) {
	keys, err := loadPublicKeys(f.keys)
	if err != nil {
		return signing.Rule{}, err
	}
	r := signing.Rule{Repositories: []string{repo}, Keys: keys, Require: require}
	if len(f.tlogKeys) > 0 {
		if r.Log, err = signing.LoadLogKeys(f.tlogKeys...); err != nil {
			return signing.Rule{}, fmt.Errorf("--tlog-key: %w", err)
		}
	}
	return r, nil
}

// policy returns the client trust policy in effect: the file --trust-policy
// names, else $BERTH_TRUST_POLICY's, else the default file when it exists.
// It returns nil when there is none.
func (f *trustFlags) policy(cmd *cobra.Command) (*signing.Policy, error) {
	file := f.policyFile
	switch {
	case cmd.Flags().Changed("trust-policy"):
		if file == "" {
			return nil, errors.New("--trust-policy: empty file name")
		}
	case os.Getenv(trustPolicyEnv) != "":
		file = os.Getenv(trustPolicyEnv)
	default:
		file = defaultTrustPolicy()
		if file == "" {
			return nil, nil
		}
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	return loadTrustPolicy(file)
}

// loadTrustPolicy reads a client trust policy file: the shape of the
// server's trust section (config.Trust), policies: [{repositories: [globs
// over namespace/name], keys: [PEM public key files], require: bool}]. Key
// files are relative to the policy file's directory. Errors name the file
// and the bad key, e.g. "trust policy trust.yaml: policies[0].keys[0]: ...".
func loadTrustPolicy(file string) (*signing.Policy, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("trust policy: %w", err)
	}
	var t config.Trust
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trust policy %s: %w", file, err)
	}
	if len(t.Policies) == 0 {
		return nil, fmt.Errorf("trust policy %s: no policies (want policies: [{repositories: [\"namespace/*\"], keys: [cosign.pub], require: true}])", file)
	}
	dir := filepath.Dir(file)
	for i := range t.Policies {
		for j, k := range t.Policies[i].Keys {
			if k != "" && !filepath.IsAbs(k) {
				t.Policies[i].Keys[j] = filepath.Join(dir, k)
			}
		}
	}
	p, err := signing.NewPolicy("", t)
	if err != nil {
		return nil, fmt.Errorf("trust policy %s: %w", file, err)
	}
	return p, nil
}

// loadPublicKeys reads the PEM public key files given with --key.
func loadPublicKeys(files []string) ([]signing.Key, error) {
	keys := make([]signing.Key, 0, len(files))
	for _, file := range files {
		k, err := signing.LoadPublicKey(file)
		if err != nil {
			return nil, keyFileError(file, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// loadSigner reads the cosign private key file given with --key. Its
// password is $COSIGN_PASSWORD when set; else, when stdin is a terminal, it
// is asked for without echo; else it is empty.
func loadSigner(cmd *cobra.Command, file string) (*signing.Signer, error) {
	if file == "" {
		return nil, errors.New("--key: empty file name")
	}
	if _, err := os.Stat(file); err != nil {
		return nil, keyFileError(file, err)
	}
	password, err := keyPassword(cmd, file)
	if err != nil {
		return nil, err
	}
	s, err := signing.LoadSigner(file, password)
	if err != nil {
		return nil, keyFileError(file, err)
	}
	return s, nil
}

// keyFileError reports err about the key file given with --key as
// "--key FILE: reason", whether or not err names the file already.
func keyFileError(file string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && pe.Path == file:
		return fmt.Errorf("--key %s: %w", file, pe.Err)
	case strings.HasPrefix(err.Error(), file+": "):
		return fmt.Errorf("--key %w", err)
	}
	return fmt.Errorf("--key %s: %w", file, err)
}

// keyPassword returns the password of the private key file.
func keyPassword(cmd *cobra.Command, file string) ([]byte, error) {
	if pw, ok := os.LookupEnv(signing.PasswordEnv); ok {
		return []byte(pw), nil
	}
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return nil, nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Enter password for private key %s: ", file)
	pw, err := term.ReadPassword(int(in.Fd()))
	fmt.Fprintln(cmd.ErrOrStderr())
	if err != nil {
		return nil, fmt.Errorf("read the password of %s: %w", file, err)
	}
	return pw, nil
}
