package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/server"
)

func newServeCmd() *cobra.Command {
	var addr, data, file string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the registry: /v2/, /healthz, /readyz and /metrics on one port",
		Long: `Run berth's registry. With no configuration it listens on :5000 and keeps
everything under ./data (filesystem blob storage).

Settings come from the YAML file named by --config (or BERTH_CONFIG), then from
BERTH_* environment variables (log.level is BERTH_LOG_LEVEL, storage.s3.bucket is
BERTH_STORAGE_S3_BUCKET), then from the flags. See docs/configuration.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("config") {
				file = os.Getenv("BERTH_CONFIG")
			}
			cfg, err := config.Load(file, os.Environ())
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("addr") {
				cfg.Addr = addr
			}
			if cmd.Flags().Changed("data") {
				cfg.Data = data
			}
			if cfg.Data != "" {
				if cfg.Data, err = filepath.Abs(cfg.Data); err != nil {
					return fmt.Errorf("data: %w", err)
				}
			}
			cfg.SetDefaults()
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("config: %w", err)
			}
			return serve(cmd, cfg)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", ":5000", "listen address, host:port (env BERTH_ADDR)")
	cmd.Flags().StringVar(&data, "data", "./data", "data directory (env BERTH_DATA)")
	cmd.Flags().StringVar(&file, "config", "", "YAML configuration file (env BERTH_CONFIG)")
	return cmd
}

func serve(cmd *cobra.Command, cfg *config.Config) error {
	ctx := cmd.Context()
	log := cfg.Log.NewLogger(cmd.ErrOrStderr())
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	secret, err := registry.LoadOrCreateSecret(cfg.Registry.HTTPSecretFile)
	if err != nil {
		return fmt.Errorf("registry.httpSecretFile: %w", err)
	}
	reg, err := registry.New(ctx, registry.Options{
		Storage:        &cfg.Storage,
		HTTPSecret:     secret,
		AllowOverwrite: cfg.AllowOverwrite,
		Logger:         log,
	})
	if err != nil {
		return err
	}
	defer reg.Close()

	srv := server.New(server.Options{
		Registry:        reg,
		Ready:           map[string]server.ReadyChecker{"storage": reg},
		Logger:          log,
		ShutdownTimeout: cfg.ShutdownTimeout,
	})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	log.Info("starting", "data", cfg.Data, "storage", cfg.Storage.Driver)
	return srv.Run(ctx, ln)
}
