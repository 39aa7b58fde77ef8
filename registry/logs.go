package registry

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/sirupsen/logrus"
)

// bridgeLogs routes distribution's logrus output into logger. Distribution
// logs every request at info level, and every error response (a 404 for a
// blob a client probes for, too) at error level; berth writes its own access
// log, so distribution's info lines and its lines about client errors (4xx)
// become debug lines here.
func bridgeLogs(logger *slog.Logger) {
	std := logrus.StandardLogger()
	std.SetOutput(io.Discard)
	std.ReplaceHooks(logrus.LevelHooks{})
	std.AddHook(slogHook{logger: logger.With("component", "distribution")})
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		std.SetLevel(logrus.DebugLevel)
	} else {
		std.SetLevel(logrus.WarnLevel)
	}
}

type slogHook struct{ logger *slog.Logger }

func (slogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h slogHook) Fire(e *logrus.Entry) error {
	level := slog.LevelDebug
	switch {
	case clientError(e):
	case e.Level <= logrus.ErrorLevel:
		level = slog.LevelError
	case e.Level == logrus.WarnLevel:
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if e.Context != nil {
		ctx = e.Context
	}
	if !h.logger.Enabled(ctx, level) {
		return nil
	}
	attrs := make([]slog.Attr, 0, len(e.Data))
	for k, v := range e.Data {
		if k == "go.version" {
			continue
		}
		attrs = append(attrs, slog.String(k, fmt.Sprint(v)))
	}
	h.logger.LogAttrs(ctx, level, e.Message, attrs...)
	return nil
}

// clientError reports whether e is distribution's log line about a response
// with a 4xx status.
func clientError(e *logrus.Entry) bool {
	status, ok := e.Data["http.response.status"].(int)
	return ok && status >= 400 && status < 500
}
