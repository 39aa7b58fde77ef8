package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/go-chi/chi/v5"
)

//go:embed assets
var assetFiles embed.FS

// asset is one embedded file as served, with the hash its URLs carry.
type asset struct {
	contentType string
	data        []byte
	hash        string
}

// assets are the files under /ui/static/: the stylesheet (with the source
// highlighting's classes for the light and the dark theme, generated once
// here) and the script.
var assets = map[string]*asset{
	"style.css": newAsset("text/css; charset=utf-8", append(mustAsset("assets/style.css"), highlightCSS()...)),
	"ui.js":     newAsset("text/javascript; charset=utf-8", mustAsset("assets/ui.js")),
}

func mustAsset(name string) []byte {
	b, err := assetFiles.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

func newAsset(contentType string, data []byte) *asset {
	sum := sha256.Sum256(data)
	return &asset{contentType: contentType, data: data, hash: hex.EncodeToString(sum[:6])}
}

// highlightCSS is the CSS of chroma's classes: the light style, and the
// dark one when the system prefers dark.
func highlightCSS() []byte {
	f := html.New(html.WithClasses(true), html.WithLineNumbers(true))
	var b bytes.Buffer
	b.WriteString("\n/* Source highlighting (chroma) */\n")
	if err := f.WriteCSS(&b, styles.Get("github")); err != nil {
		panic(err)
	}
	b.WriteString("@media (prefers-color-scheme: dark) {\n")
	if err := f.WriteCSS(&b, styles.Get("github-dark")); err != nil {
		panic(err)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// staticURL is the URL of an asset, with its content hash: a changed file
// gets a new URL, so each can be cached for good.
func staticURL(name string) string {
	return "/ui/static/" + name + "?v=" + assets[name].hash
}

// static serves an asset, cached for a year when the URL carries its
// current hash.
func (h *handler) static(w http.ResponseWriter, r *http.Request) error {
	a, ok := assets[chi.URLParam(r, "file")]
	if !ok {
		return errNoPage
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Content-Length", strconv.Itoa(len(a.data)))
	if r.URL.Query().Get("v") == a.hash {
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hdr.Set("Cache-Control", "no-cache")
	}
	hdr.Set("ETag", `"`+a.hash+`"`)
	if r.Header.Get("If-None-Match") == `"`+a.hash+`"` {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	_, err := w.Write(a.data)
	return err
}
