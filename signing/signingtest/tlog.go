package signingtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/go-openapi/runtime"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/types"
	_ "github.com/sigstore/rekor/pkg/types/hashedrekord/v0.0.1" // the entry kind cosign uploads
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Log is a transparency log for tests, on loopback: it takes entries the way
// Rekor's API does (POST /api/v1/log/entries), canonicalizes them with
// Rekor's own entry types, and answers with a signed entry timestamp (the
// log's promise of inclusion) made with its own key. It keeps no Merkle
// tree: it serves what cosign attaches to a signature and checks offline.
type Log struct {
	// URL is the log's base URL, for cosign's --rekor-url and berth sign --tlog.
	URL string
	// PublicKeyFile holds the log's PEM public key (SIGSTORE_REKOR_PUBLIC_KEY
	// for cosign, tlogKeys for berth).
	PublicKeyFile string

	key   *ecdsa.PrivateKey
	logID string
	mu    sync.Mutex
	index int64
}

// NewLog starts a log with a new key and stops it when the test ends.
func NewLog(t testing.TB) *Log {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	l := &Log{key: key, logID: hex.EncodeToString(sum[:])}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	l.PublicKeyFile = filepath.Join(t.TempDir(), "rekor.pub")
	if err := os.WriteFile(l.PublicKeyFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/log/entries", l.add)
	mux.HandleFunc("GET /api/v1/log/publicKey", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(pemBytes)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	l.URL = srv.URL
	return l
}

// add records a proposed entry and answers with it, signed.
func (l *Log) add(w http.ResponseWriter, r *http.Request) {
	pe, err := models.UnmarshalProposedEntry(r.Body, runtime.JSONConsumer())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	entry, err := types.CreateVersionedEntry(pe)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := types.CanonicalizeEntry(r.Context(), entry)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	index := l.index
	l.index++
	l.mu.Unlock()
	integrated := time.Now().Unix()
	encoded := base64.StdEncoding.EncodeToString(body)
	set, err := l.sign(cbundle.RekorPayload{Body: encoded, IntegratedTime: integrated, LogIndex: index, LogID: l.logID})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(body)
	uuid := hex.EncodeToString(sum[:])
	resp := models.LogEntry{uuid: models.LogEntryAnon{
		Body: encoded, IntegratedTime: &integrated, LogID: &l.logID, LogIndex: &index,
		Verification: &models.LogEntryAnonVerification{SignedEntryTimestamp: set},
	}}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/api/v1/log/entries/"+uuid)
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(resp)
}

// sign makes the signed entry timestamp of an entry: the log's signature
// over its canonical JSON, as Rekor makes it and cosign checks it.
func (l *Log) sign(p cbundle.RekorPayload) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	canonical, err := jsoncanonicalizer.Transform(b)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canonical)
	return ecdsa.SignASN1(rand.Reader, l.key, sum[:])
}
