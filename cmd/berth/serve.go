package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/node"
)

func newServeCmd() *cobra.Command {
	var flags serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run berth: the registry /v2/, the catalog /api/v1/, /api/helm/ and /index.yaml, /healthz, /readyz, /metrics and the web UI / on one port",
		Long: `Run berth's registry and catalog in one process. With no configuration it
listens on :5000 and keeps everything under ./data (filesystem blob storage and
a SQLite catalog).

Settings come from the YAML file named by --config (or BERTH_CONFIG), then from
BERTH_* environment variables (log.level is BERTH_LOG_LEVEL, storage.s3.bucket is
BERTH_STORAGE_S3_BUCKET), then from the flags. See docs/configuration.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.load(cmd)
			if err != nil {
				return err
			}
			return serve(cmd, cfg, node.New)
		},
	}
	flags.register(cmd)

	var registryURL string
	catalogCmd := &cobra.Command{
		Use:   "catalog",
		Short: "Run only the catalog, indexing the registry at --registry",
		Long: `Run berth's catalog on its own: /api/v1/, /api/helm/, /index.yaml, /healthz,
/readyz and /metrics. It reads packages from any OCI registry over the
distribution API and follows it through distribution's notification webhooks,
which the registry sends to POST /events on this server; it also reconciles
with the registry at start and every catalog.reconcileInterval, so lost events
are repaired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.load(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("registry") {
				cfg.Catalog.Registry = registryURL
			}
			if cfg.Catalog.Registry == "" {
				return errors.New("catalog.registry: required by berth serve catalog (--registry http(s)://host[:port])")
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("config: %w", err)
			}
			return serve(cmd, cfg, node.NewCatalog)
		},
	}
	flags.register(catalogCmd)
	catalogCmd.Flags().StringVar(&registryURL, "registry", "", "base URL of the registry to index, http(s)://host[:port] (env BERTH_CATALOG_REGISTRY)")
	cmd.AddCommand(catalogCmd)
	return cmd
}

// serveFlags are the flags every serve command has.
type serveFlags struct {
	addr, data, file string
}

func (f *serveFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.addr, "addr", ":5000", "listen address, host:port (env BERTH_ADDR)")
	cmd.Flags().StringVar(&f.data, "data", "./data", "data directory (env BERTH_DATA)")
	cmd.Flags().StringVar(&f.file, "config", "", "YAML configuration file (env BERTH_CONFIG)")
}

// load reads the configuration file and environment, applies the flags, fills
// defaults and validates.
func (f *serveFlags) load(cmd *cobra.Command) (*config.Config, error) {
	file := f.file
	if !cmd.Flags().Changed("config") {
		file = os.Getenv("BERTH_CONFIG")
	}
	cfg, err := config.Load(file, os.Environ())
	if err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("addr") {
		cfg.Addr = f.addr
	}
	if cmd.Flags().Changed("data") {
		cfg.Data = f.data
	}
	if cfg.Data != "" {
		if cfg.Data, err = filepath.Abs(cfg.Data); err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// serve assembles a node with assemble (node.New or node.NewCatalog) and
// serves until the command's context ends (SIGINT, SIGTERM).
func serve(cmd *cobra.Command, cfg *config.Config, assemble func(context.Context, *config.Config, node.Options) (*node.Node, error)) error {
	ctx := cmd.Context()
	n, err := assemble(ctx, cfg, node.Options{Logger: cfg.Log.NewLogger(cmd.ErrOrStderr())})
	if err != nil {
		return err
	}
	defer n.Close()
	return n.Serve(ctx)
}
