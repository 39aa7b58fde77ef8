package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/client"
)

// registryConfigFlag names the Docker config file that holds credentials.
const registryConfigFlag = "registry-config"

// credentialStore returns the credential store of the Docker config file
// --registry-config names, else of the default one, with its credential
// helpers.
func credentialStore(cmd *cobra.Command) (credentials.Store, error) {
	path, err := cmd.Flags().GetString(registryConfigFlag)
	if err != nil {
		return nil, err
	}
	store, err := client.NewCredentialStore(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", registryConfigFlag, err)
	}
	return store, nil
}

// newLoginCmd returns `berth login HOST`.
func newLoginCmd() *cobra.Command {
	var (
		remote        remoteFlags
		user          string
		password      string
		passwordStdin bool
		format        outputFormat
	)
	cmd := &cobra.Command{
		Use:   "login HOST",
		Short: "Log in to a registry, keeping the credentials as docker and oras do",
		Long: `Log in to the registry at HOST (host[:port]): check the user name and password
against it, through its token service when it has one, then keep them in the
Docker config file (--registry-config, default $DOCKER_CONFIG/config.json, else
~/.docker/config.json), or in the credential helper it names, as docker login
and oras login do. Every berth command that talks to HOST then uses them.

Without --password or --password-stdin, the password is asked for on the
terminal, and so is the user name without --username. A robot account logs in
with its user name, robot+NAMESPACE+NAME, and its secret.`,
		Example: `  berth login localhost:5000 -u alice
  echo "$ROBOT_SECRET" | berth login berth.example.com -u robot+team-a+ci --password-stdin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			host := args[0]
			if passwordStdin {
				if user == "" {
					return errors.New("--password-stdin needs --username")
				}
				secret, err := readSecret(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read the password from stdin: %w", err)
				}
				password = secret
			} else if password == "" {
				var err error
				if user, password, err = prompt(cmd, user); err != nil {
					return err
				}
			}
			switch {
			case user == "":
				return errors.New("empty user name")
			case password == "":
				return errors.New("empty password")
			}
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			if err := c.Login(cmd.Context(), host, auth.Credential{Username: user, Password: password}); err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), loginResult{Host: host, Username: user})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s\n", clean(host), clean(user))
			return err
		},
	}
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	f := cmd.Flags()
	f.StringVarP(&user, "username", "u", "", "user `NAME` (a robot's is robot+NAMESPACE+NAME)")
	f.StringVarP(&password, "password", "p", "", "`PASSWORD`, or a robot's secret (visible to other users of this machine: prefer --password-stdin)")
	f.BoolVar(&passwordStdin, "password-stdin", false, "read the password from stdin")
	cmd.MarkFlagsMutuallyExclusive("password", "password-stdin")
	return cmd
}

// loginResult is what berth login --format json prints: never the password.
type loginResult struct {
	Host     string `json:"host"`
	Username string `json:"username"`
}

// logoutResult is what berth logout --format json prints.
type logoutResult struct {
	Host string `json:"host"`
	// Removed is false when no credentials were kept for Host.
	Removed bool `json:"removed"`
}

// readSecret reads a password from r: everything up to the end, without the
// line break that ends it.
func readSecret(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}

// prompt asks the terminal for the user name (when user is empty) and the
// password, which it does not echo.
func prompt(cmd *cobra.Command, user string) (string, string, error) {
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return "", "", errors.New("no password: give --password-stdin (or --password), or run berth login on a terminal")
	}
	out := cmd.ErrOrStderr()
	if user == "" {
		fmt.Fprint(out, "Username: ")
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", "", err
		}
		user = strings.TrimSpace(line)
	}
	fmt.Fprint(out, "Password: ")
	password, err := term.ReadPassword(int(in.Fd()))
	fmt.Fprintln(out)
	if err != nil {
		return "", "", err
	}
	return user, string(password), nil
}

// newLogoutCmd returns `berth logout HOST`.
func newLogoutCmd() *cobra.Command {
	var (
		remote remoteFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "logout HOST",
		Short: "Remove the credentials kept for a registry",
		Long: `Remove the credentials berth login (or docker login, oras login) kept for HOST
from the Docker config file (--registry-config) or its credential helper.

When they are an identity token (a refresh token, as docker login keeps), it
is revoked at the registry first, so that no copy of it works any more; when
the registry cannot be reached or refuses, the credentials stay stored and
the error says why.`,
		Example: `  berth logout localhost:5000`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			removed, err := c.Logout(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case format == formatJSON:
				err = writeJSON(out, logoutResult{Host: args[0], Removed: removed})
			case removed:
				_, err = fmt.Fprintf(out, "Removed the credentials for %s\n", clean(args[0]))
			default:
				_, err = fmt.Fprintf(out, "Not logged in to %s\n", clean(args[0]))
			}
			return err
		},
	}
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}
