package searchindex

import (
	"slices"
	"strings"
	"testing"
)

func TestQueryTokens(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"kafka", []string{"kafka"}},
		{"Kafka Operator", []string{"kafka", "operator"}},
		{"  cert-manager ", []string{"cert", "manager"}},
		{`"a" AND b*`, []string{"a", "and", "b"}},
		{"NEAR(x y)", []string{"near", "x", "y"}},
		{"name:kafka {a b}: ^c", []string{"name", "kafka", "a", "b", "c"}},
		{"x_y a.b c/d e'f", []string{"x", "y", "a", "b", "c", "d", "e", "f"}},
		{"v1.2.3-rc.1", []string{"v1", "2", "3", "rc", "1"}},
		// Diacritics go, precomposed or combining; case folds.
		{"Café RÉSUMÉ naïve", []string{"cafe", "resume", "naive"}},
		{"cafe\u0301 Ǖber", []string{"cafe", "uber"}},
		{"İstanbul Straße ŁÓDŹ", []string{"istanbul", "straße", "łodz"}},
		// Other scripts: letters and marks make words.
		{"日本語のパッケージ", []string{"日本語のパッケージ"}},
		{"हिन्दी text", []string{"हिन्दी", "text"}},
		// Separators only, a lone combining mark, NUL, invalid UTF-8.
		{"\x00\xff -*:^ \u0301", nil},
		{"kaf\x00ka", []string{"kaf", "ka"}},
		{"\xfe\xffkafka\xff", []string{"kafka"}},
		{"🚀 kafka", []string{"kafka"}},
		{"", nil},
	} {
		if got := queryTokens(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("queryTokens(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	if got := queryTokens(strings.Repeat("w ", 100)); len(got) != maxQueryTokens {
		t.Errorf("queryTokens of 100 words kept %d, want %d", len(got), maxQueryTokens)
	}
}

func TestDocumentTerms(t *testing.T) {
	ix := newIndex(testDoc("a", "redis-operator", func(d *Doc) {
		d.Summary.DisplayName = "Redis Operator"
		d.Summary.Description = "Runs Redis."
		d.Summary.Keywords = []string{"redis", "cache"}
		d.Maintainers = "Ada Lovelace"
		d.APIs = "RedisCluster redis.example.io"
	}))
	// name 2 + display name 2 + description 2 + keywords 2 + maintainers 2 + APIs 4
	if n := ix.hot[0].length; n != 14 {
		t.Errorf("length = %d, want 14", n)
	}
	for tok, want := range map[string]uint32{
		"redis":        weightName + weightDisplayName + weightDescription + weightKeywords + weightAPIs,
		"operator":     weightName + weightDisplayName,
		"cache":        weightKeywords,
		"lovelace":     weightMaintainers,
		"rediscluster": weightAPIs,
		"runs":         weightDescription,
	} {
		if ps := ix.terms[ix.termIDs[tok]].postings; len(ps) != 1 || ps[0].freq != want {
			t.Errorf("postings of %q = %v, want one of weighted frequency %d", tok, ps, want)
		}
	}
}

func TestFold(t *testing.T) {
	for _, tc := range []struct{ in, want rune }{
		{'É', 'e'}, {'é', 'e'}, {'Ç', 'c'}, {'ñ', 'n'}, {'Ő', 'o'}, {'ǚ', 'u'}, {'Ḁ', 'a'}, {'ỹ', 'y'},
		{'ß', 'ß'}, {'Ø', 'ø'}, {'Ж', 'ж'}, {'日', '日'}, {'\u0301', -1}, {'\u036F', -1},
	} {
		if got := fold(tc.in); got != tc.want {
			t.Errorf("fold(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
