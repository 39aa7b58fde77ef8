// Command berth is the berth registry server and its client.
//
// berth serve runs the registry, and the client commands (package, push, import, pull,
// inspect, search, show, usage, sources, upgrades, sign, verify, promote) package, move, find
// and sign operator packages; login and logout keep registry credentials,
// robot manages robot accounts and auth check explains access decisions. This file only wires commands together; each
// subcommand lives in a file of its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/client"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the berth command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			return exit.code
		}
		fmt.Fprintf(stderr, "Error: %v\n", err)
		switch {
		case client.IsCertificateError(err):
			fmt.Fprintln(stderr, "Hint: the server's certificate did not verify. If a private certificate authority issued it, give that authority's certificate with --ca-file FILE.")
		case client.IsClientCertificateRefusal(err):
			fmt.Fprintln(stderr, "Hint: the server ended the TLS connection. If it requires a client certificate, give one with --cert-file FILE --key-file FILE.")
		}
		return 1
	}
	return 0
}

// exitError ends the command with a given exit code after the command has
// already reported the failure itself.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "An OCI-native registry for Kubernetes operator packages",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String(registryConfigFlag, "",
		"Docker config `FILE` holding registry credentials (default $DOCKER_CONFIG/config.json, else ~/.docker/config.json)")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newServeCmd(),
		newPackageCmd(),
		newPushCmd(),
		newImportCmd(),
		newPullCmd(),
		newInspectCmd(),
		newSearchCmd(),
		newShowCmd(),
		newUsageCmd(),
		newSourcesCmd(),
		newUpgradesCmd(),
		newPermissionsCmd(),
		newApproveCmd(),
		newSignCmd(),
		newVerifyCmd(),
		newPromoteCmd(),
		newMirrorCmd(),
		newLoginCmd(),
		newLogoutCmd(),
		newRobotCmd(),
		newDeleteCmd(),
		newGCCmd(),
		newAuthCmd(),
	)
	return root
}

// version is berth's release, set at build time by the Makefile
// (-ldflags "-X main.version=...").
var version = "dev"

// versionString is what berth --version prints: berth's version, and the
// distribution registry and Go it was built with.
func versionString() string {
	distribution := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/distribution/distribution/v3" {
				distribution = dep.Version
			}
		}
	}
	return fmt.Sprintf("%s (distribution %s, %s)", version, distribution, runtime.Version())
}
