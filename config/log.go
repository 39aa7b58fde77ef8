package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ParseLevel parses a log level name: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("want debug, info, warn or error (got %q)", s)
}

// NewLogger builds the logger the configuration asks for, writing to w.
// Call it after Validate.
func (l Log) NewLogger(w io.Writer) *slog.Logger {
	level, _ := ParseLevel(l.Level)
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
