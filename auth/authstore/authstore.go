// Package authstore opens the auth.IdentityStore a configuration names: on
// the catalog's PostgreSQL (auth/authpg) when catalog.database is a
// postgres:// URL, so that every replica shares robots and revocations;
// else in the SQLite file auth.robots.database (auth/robotdb), for one
// process.
package authstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/auth/authpg"
	"github.com/berth-registry/berth/auth/robotdb"
	"github.com/berth-registry/berth/config"
)

// Open opens the store cfg names; cfg must have an auth section. Errors
// name the config key at fault.
func Open(ctx context.Context, cfg *config.Config) (auth.IdentityStore, error) {
	if cfg.Catalog.Postgres() {
		s, err := authpg.Open(ctx, cfg.Catalog.Database)
		if err != nil {
			return nil, fmt.Errorf("catalog.database: %w", err)
		}
		return s, nil
	}
	s, err := robotdb.Open(ctx, cfg.Auth.Robots.Database)
	if err != nil {
		return nil, fmt.Errorf("auth.robots.database: %w", err)
	}
	return s, nil
}

// ImportSQLite brings the robots of a berth that kept them in SQLite into
// PostgreSQL: when cfg's catalog is on PostgreSQL and the file
// auth.robots.database exists, every robot of the file that store lacks is
// copied into store (revoked ones stay revoked), and log says how many, and
// that the file is read no more. A robot whose name store holds with
// another secret keeps store's and is named in a warning. The copy is
// idempotent: replicas that each had their own file bring in the union.
func ImportSQLite(ctx context.Context, cfg *config.Config, store auth.RobotStore, log *slog.Logger) error {
	file := cfg.Auth.Robots.Database
	if !cfg.Catalog.Postgres() {
		return nil
	}
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("auth.robots.database: %w", err)
	}
	old, err := robotdb.Open(ctx, file)
	if err != nil {
		return fmt.Errorf("auth.robots.database: import the robots of %s into PostgreSQL: %w; move the file away to start without them", file, err)
	}
	defer old.Close()
	robots, err := old.List(ctx, "")
	if err != nil {
		return fmt.Errorf("auth.robots.database: import the robots of %s into PostgreSQL: %w", file, err)
	}
	var imported int
	var differ []string
	for _, r := range robots {
		err := store.Create(ctx, r)
		switch {
		case err == nil:
			imported++
			continue
		case !errors.Is(err, auth.ErrRobotExists):
			return fmt.Errorf("auth.robots.database: import %s of %s into PostgreSQL: %w", r.Username(), file, err)
		}
		have, err := store.Get(ctx, r.Namespace, r.Name)
		if err != nil {
			return fmt.Errorf("auth.robots.database: import %s of %s into PostgreSQL: %w", r.Username(), file, err)
		}
		if string(have.SecretHash) != string(r.SecretHash) {
			differ = append(differ, r.Username())
		}
	}
	if len(differ) > 0 {
		log.Warn("auth: robots of the SQLite file differ from the ones of the same name in PostgreSQL, whose secrets are kept: give their users the secrets PostgreSQL's have, or revoke and recreate them",
			"file", file, "robots", strings.Join(differ, ","))
	}
	log.Info("auth: robots now live in PostgreSQL (catalog.database); the SQLite file is read no more and may be removed once every replica has started",
		"file", file, "robots in the file", len(robots), "imported", imported)
	return nil
}
