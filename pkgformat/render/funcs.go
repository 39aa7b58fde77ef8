package render

import (
	"encoding/base64"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// sprigFuncs is sprig's function map (as Helm and KUDO give it to
// templates) without the functions that read the environment (dropped,
// each name of drop) and with every function that builds a value from a
// number checked against e's budget before it allocates. Costly
// cryptography, randomness and the clock are replaced by fixed
// placeholders: what a template derives from them is never an image, and
// the same package must always give the same metadata.
func (e *engine) sprigFuncs(drop ...string) template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range drop {
		delete(f, name)
	}
	maxBytes, items := e.budget.Output, e.budget.Output/16
	sized := func(name string, n int64, limit int64) {
		if n > limit || n < 0 {
			panic(e.refuse("%s would build more than %d bytes or items", name, limit))
		}
	}
	until, untilStep, seq, repeat := f["until"].(func(int) []int), f["untilStep"].(func(int, int, int) []int), f["seq"].(func(...int) string), f["repeat"].(func(int, string) string)
	indent, nindent := f["indent"].(func(int, string) string), f["nindent"].(func(int, string) string)
	f["until"] = func(n int) []int { sized("until", span(0, n, 1), items); return until(n) }
	f["untilStep"] = func(start, stop, step int) []int {
		sized("untilStep", span(start, stop, step), items)
		return untilStep(start, stop, step)
	}
	f["seq"] = func(params ...int) string {
		if len(params) > 0 {
			sized("seq", span(min(params[0], params[len(params)-1]), max(params[0], params[len(params)-1]), 1), items)
		}
		return seq(params...)
	}
	f["repeat"] = func(n int, s string) string { sized("repeat", int64(n)*int64(len(s)), maxBytes); return repeat(n, s) }
	f["indent"] = func(n int, s string) string {
		sized("indent", int64(n)*int64(strings.Count(s, "\n")+1), maxBytes)
		return indent(n, s)
	}
	f["nindent"] = func(n int, s string) string {
		sized("nindent", int64(n)*int64(strings.Count(s, "\n")+2), maxBytes)
		return nindent(n, s)
	}
	for name, letter := range map[string]string{"randAlphaNum": "x", "randAlpha": "x", "randAscii": "x", "randNumeric": "0"} {
		f[name] = func(n int) string { sized(name, int64(n), maxBytes); return strings.Repeat(letter, max(n, 0)) }
	}
	f["randBytes"] = func(n int) (string, error) {
		sized("randBytes", int64(n), maxBytes)
		return base64.StdEncoding.EncodeToString(make([]byte, max(n, 0))), nil
	}
	f["printf"] = func(format string, args ...any) string {
		sized("printf", widths(format), maxBytes)
		return fmt.Sprintf(format, args...)
	}
	// text/template's own functions that build strings, so that they are
	// counted and checked like the others.
	f["print"], f["println"] = fmt.Sprint, fmt.Sprintln
	f["html"], f["js"], f["urlquery"] = template.HTMLEscaper, template.JSEscaper, template.URLQueryEscaper
	f["getHostByName"] = func(string) string { return "" }
	for name, fn := range placeholders {
		if _, ok := f[name]; ok {
			f[name] = fn
		}
	}
	return f
}

// span is how many values start, start+step... stay below stop (above,
// counting down).
func span(start, stop, step int) int64 {
	if step == 0 {
		return 0
	}
	if step < 0 {
		start, stop, step = stop, start, -step
	}
	if stop <= start {
		return 0
	}
	return (int64(stop) - int64(start) + int64(step) - 1) / int64(step)
}

// widths is the sum of the widths and precisions a printf format asks
// for: fmt pads to each, so they bound what the result takes beyond its
// arguments.
func widths(format string) int64 {
	var sum, n int64
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c >= '0' && c <= '9' {
			n = min(n*10+int64(c-'0'), 1<<40)
			continue
		}
		sum, n = sum+n, 0
	}
	return sum + n
}

// certificate is what sprig's certificate functions return.
type certificate struct {
	Cert string
	Key  string
}

// The placeholders of costly or random cryptography.
const (
	placeholderKey  = "-----BEGIN PRIVATE KEY-----\nYmVydGggcmVuZGVyIHBsYWNlaG9sZGVy\n-----END PRIVATE KEY-----\n"
	placeholderCert = "-----BEGIN CERTIFICATE-----\nYmVydGggcmVuZGVyIHBsYWNlaG9sZGVy\n-----END CERTIFICATE-----\n"
	placeholderHash = "berth-render-placeholder"
)

var placeholderCertificate = certificate{Cert: placeholderCert, Key: placeholderKey}

// placeholderTime is what now returns.
var placeholderTime = time.Date(2000, 6, 15, 12, 0, 0, 0, time.UTC)

// placeholders replace sprig's key, certificate and password functions,
// its random values and its clock.
var placeholders = template.FuncMap{
	"now":             func() time.Time { return placeholderTime },
	"uuidv4":          func() string { return "00000000-0000-4000-8000-000000000000" },
	"randInt":         func(lo, _ int) int { return lo },
	"shuffle":         func(s string) string { return s },
	"genPrivateKey":   func(string) string { return placeholderKey },
	"derivePassword":  func(uint32, string, string, string, string) string { return placeholderHash },
	"bcrypt":          func(string) string { return placeholderHash },
	"htpasswd":        func(user, _ string) string { return user + ":" + placeholderHash },
	"buildCustomCert": func(string, string) (certificate, error) { return placeholderCertificate, nil },
	"genCA":           func(string, int) (certificate, error) { return placeholderCertificate, nil },
	"genCAWithKey":    func(string, int, string) (certificate, error) { return placeholderCertificate, nil },
	"genSelfSignedCert": func(string, []any, []any, int) (certificate, error) {
		return placeholderCertificate, nil
	},
	"genSelfSignedCertWithKey": func(string, []any, []any, int, string) (certificate, error) {
		return placeholderCertificate, nil
	},
	"genSignedCert": func(string, []any, []any, int, certificate) (certificate, error) {
		return placeholderCertificate, nil
	},
	"genSignedCertWithKey": func(string, []any, []any, int, certificate, string) (certificate, error) {
		return placeholderCertificate, nil
	},
}
