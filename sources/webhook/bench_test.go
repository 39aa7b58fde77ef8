package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/sources/webhook"
)

// BenchmarkDelivery is one signed push delivery to a server that follows
// 1,000 git sources, one of them the delivery's: the cost of matching the
// payload's URLs to every source, and of one secret read and one HMAC.
// The body is a push payload padded to size.
func BenchmarkDelivery(b *testing.B) {
	for _, size := range []int{4 << 10, webhook.MaxBody / 2} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			file := filepath.Join(b.TempDir(), "secret")
			if err := os.WriteFile(file, []byte(secretA), 0o600); err != nil {
				b.Fatal(err)
			}
			var srcs []config.Source
			for i := range 1000 {
				srcs = append(srcs, config.Source{Package: fmt.Sprintf("op%d", i), Kind: "git",
					URL: fmt.Sprintf("https://github.com/org/op%d", i), WebhookSecretFile: file})
			}
			cfg := &config.Config{Namespaces: []config.Namespace{{Name: "a", Sources: srcs}}}
			h := webhook.New(cfg, func(context.Context, string, string) error { return nil }, slog.New(slog.DiscardHandler))
			push := githubPush("https://github.com/org/op500")
			body := append(push[:len(push)-1:len(push)-1], []byte(`,"pad":"`+strings.Repeat("x", size-len(push))+`"}`)...)
			sig := sign(secretA, body)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
				r.Header.Set("X-GitHub-Event", "push")
				r.Header.Set("X-Hub-Signature-256", sig)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusAccepted {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
