package authstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/auth/authpg"
	"github.com/berth-registry/berth/auth/authstore"
	"github.com/berth-registry/berth/auth/robotdb"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func robot(name, secret string) *auth.Robot {
	sum := sha256.Sum256([]byte(secret))
	now := time.Now().UTC().Truncate(time.Microsecond)
	return &auth.Robot{Namespace: "a", Name: name, Scopes: []auth.RobotScope{{Repositories: []string{"a/*"}, Actions: []auth.Action{auth.Pull}}},
		CreatedBy: "user:alice", CreatedAt: now, ExpiresAt: now.Add(time.Hour), SecretHash: sum[:]}
}

// TestOpen: the catalog's PostgreSQL when it is there, else the SQLite
// file, which the PostgreSQL case never creates.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "auth.db")
	for _, tc := range []struct {
		database string
		want     any
	}{
		{pgtest.Database(t), &authpg.Store{}},
		{filepath.Join(t.TempDir(), "catalog.db"), &robotdb.Store{}},
	} {
		cfg := &config.Config{Catalog: config.Catalog{Database: tc.database}, Auth: &config.Auth{Robots: config.Robots{Database: file}}}
		_, fileBefore := os.Stat(file)
		s, err := authstore.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, fileAfter := os.Stat(file)
		switch tc.want.(type) {
		case *authpg.Store:
			if _, ok := s.(*authpg.Store); !ok || errors.Is(fileBefore, os.ErrNotExist) != errors.Is(fileAfter, os.ErrNotExist) {
				t.Errorf("catalog on PostgreSQL: store %T, the SQLite file created: %v", s, fileAfter == nil)
			}
		case *robotdb.Store:
			if _, ok := s.(*robotdb.Store); !ok || fileAfter != nil {
				t.Errorf("catalog on SQLite: store %T, auth.robots.database: %v", s, fileAfter)
			}
		}
		s.Close()
	}
}

// TestImportSQLite: the robots of auth.db that PostgreSQL lacks are copied
// once, revoked ones revoked; one of a name PostgreSQL holds with another
// secret keeps PostgreSQL's and is named in a warning.
func TestImportSQLite(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "auth.db")
	cfg := &config.Config{Catalog: config.Catalog{Database: pgtest.Database(t)}, Auth: &config.Auth{Robots: config.Robots{Database: file}}}
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	pg, err := authpg.Open(ctx, cfg.Catalog.Database)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := authstore.ImportSQLite(ctx, cfg, pg, logger); err != nil || log.Len() > 0 {
		t.Fatalf("without auth.db: %v, logged %q", err, log.String())
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the import created auth.db: %v", err)
	}
	old, err := robotdb.Open(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*auth.Robot{robot("ci", "s1"), robot("old", "s2"), robot("clash", "sqlite-secret")} {
		if err := old.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	revokedAt := time.Now().UTC().Truncate(time.Microsecond)
	if err := old.Revoke(ctx, "a", "old", revokedAt); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if err := pg.Create(ctx, robot("clash", "postgres-secret")); err != nil {
		t.Fatal(err)
	}
	for round, want := range []string{"imported=2", "imported=0"} {
		log.Reset()
		if err := authstore.ImportSQLite(ctx, cfg, pg, logger); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(log.String(), want) || !strings.Contains(log.String(), "robots=robot+a+clash") {
			t.Errorf("round %d logged %q, want %s and a warning naming robot+a+clash", round, log.String(), want)
		}
	}
	all, err := pg.List(ctx, "a")
	if err != nil || len(all) != 3 {
		t.Fatalf("PostgreSQL holds %d robots, %v; want 3", len(all), err)
	}
	clash := sha256.Sum256([]byte("postgres-secret"))
	// By name: ci, clash, old.
	if !bytes.Equal(all[1].SecretHash, clash[:]) || !all[2].RevokedAt.Equal(revokedAt) || !all[0].RevokedAt.IsZero() {
		t.Errorf("clash kept PostgreSQL's secret %v; old revoked at %v, want %v; ci revoked at %v", bytes.Equal(all[1].SecretHash, clash[:]), all[2].RevokedAt, revokedAt, all[0].RevokedAt)
	}
	if err := authstore.ImportSQLite(ctx, &config.Config{Catalog: config.Catalog{Database: "catalog.db"}, Auth: cfg.Auth}, pg, logger); err != nil {
		t.Errorf("catalog on SQLite: %v, want nothing done", err)
	}
}
