package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// authMatrix is what every operation (a row) answers every subject (a
// column) of TestAuthMatrix, through a real berth serve with auth on. The
// reads come first, so that every subject reads the same packages; the
// writes follow.
//
// A number is that status; D is a denial, 401 or 403 (a token without the
// action gets a 401 challenge, Basic credentials without it a 403); N is 404,
// the answer for a package that does not exist; A is 401 or 404 (an
// anonymous delete of what it cannot see).
//
// A /v2/ client sends its credentials only when challenged, as docker and
// oras do, and public reads are not challenged: so the revoked and expired
// robots read pub's manifests, tags and referrers, having never presented
// their credentials; everywhere they present them they get 401.
//
// Namespaces: a (alice's, the robots' and the signer's), b (bob's), pub
// (public). The per-namespace rows read the namespace's fixture package:
// a/kafka, b/elastic, pub/cowsay. push pushes a new plain package; the
// deletes delete a package pushed for that subject to delete when it may,
// else one that stays.
const authMatrix = `
op                  anonymous alice bob  robot-pull robot-push robot-expired robot-revoked signer admin
catalog             200       200   200  200        200        401           401           200    200
search              200       200   200  200        200        401           401           200    200
changes             200       200   200  200        200        401           401           200    200
artifacts           200       200   200  200        200        401           401           200    200
index               200       200   200  200        200        401           401           200    200
helm-index          200       200   200  200        200        401           401           200    200
metrics             D         D     D    D          D          401           401           D      200
a:manifest          D         200   D    200        200        401           401           200    200
a:tags              D         200   D    200        200        401           401           200    200
a:referrers         D         200   D    200        200        401           401           200    200
a:show              N         200   N    200        200        401           401           200    200
a:version           N         200   N    200        200        401           401           200    200
a:files             N         200   N    200        200        401           401           200    200
a:upgrades          N         200   N    200        200        401           401           200    200
a:ns-search         200       200   200  200        200        401           401           200    200
a:ns-index          200       200   200  200        200        401           401           200    200
a:ns-helm-index     200       200   200  200        200        401           401           200    200
b:manifest          D         D     200  D          D          401           401           D      200
b:tags              D         D     200  D          D          401           401           D      200
b:referrers         D         D     200  D          D          401           401           D      200
b:show              N         N     200  N          N          401           401           N      200
b:version           N         N     200  N          N          401           401           N      200
b:files             N         N     200  N          N          401           401           N      200
b:upgrades          N         N     200  N          N          401           401           N      200
b:ns-search         200       200   200  200        200        401           401           200    200
b:ns-index          200       200   200  200        200        401           401           200    200
b:ns-helm-index     200       200   200  200        200        401           401           200    200
pub:manifest        200       200   200  200        200        200           200           200    200
pub:tags            200       200   200  200        200        200           200           200    200
pub:referrers       200       200   200  200        200        200           200           200    200
pub:show            200       200   200  200        200        401           401           200    200
pub:version         200       200   200  200        200        401           401           200    200
pub:files           200       200   200  200        200        401           401           200    200
pub:upgrades        200       200   200  200        200        401           401           200    200
pub:ns-search       200       200   200  200        200        401           401           200    200
pub:ns-index        200       200   200  200        200        401           401           200    200
pub:ns-helm-index   200       200   200  200        200        401           401           200    200
a:push              D         201   D    D          201        401           401           D      201
b:push              D         D     201  D          D          401           401           D      201
a:v2-delete         D         202   D    D          D          401           401           D      202
b:v2-delete         D         D     202  D          D          401           401           D      202
a:api-delete        A         200   N    D          D          401           401           D      200
b:api-delete        A         N     200  N          N          401           401           N      200
`

// matrixSubject is a column of authMatrix.
type matrixSubject struct {
	name  string
	creds creds
	// sees are the namespaces whose packages it may pull.
	sees []string
	// deletes are the namespaces it may delete in.
	deletes []string
}

// matrixPackage is the package a namespace's read rows read.
type matrixPackage struct {
	name, from, version, digest string
}

// matrix is the state of TestAuthMatrix.
type matrix struct {
	s *authServer
	// names and digests are the packages and the manifest digests of each
	// namespace: what a subject that may not pull there must never be shown.
	names, digests map[string][]string
	fixture        map[string]matrixPackage
	// victims are the packages the delete rows delete: ns+"/"+subject+"/"+row
	// for a subject that may delete there, ns+"/standing" for the others;
	// victimDigest maps their names to their manifest digests.
	victims      map[string]string
	victimDigest map[string]string
}

// matrixOutcome is what one cell did.
type matrixOutcome struct {
	flow []hop
	// twin is the same request for a name never created, when the request
	// names a package (or namespace) the subject may not see: the two
	// answers must be the same. name and never are the two names ("" for a
	// namespace, whose index names no namespace).
	twin        []hop
	name, never string
	// named are the names and digests the request itself names, which its
	// answer may echo.
	named []string
}

// TestAuthMatrix runs every operation of every surface (the OCI API, the
// catalog API, the repository indexes, /metrics) as every kind of subject
// against packages in a, b and the public pub, through a real berth serve
// with auth on, and checks each status against authMatrix. Every header and
// body (and the claims of every token) is scanned for the names and digests
// of the packages the subject may not see; where a request itself names one,
// its answer must be the one for a name never created.
func TestAuthMatrix(t *testing.T) {
	s := startAuthServer(t, authOptions{})
	m := &matrix{
		s:            s,
		names:        map[string][]string{},
		digests:      map[string][]string{},
		fixture:      map[string]matrixPackage{},
		victims:      map[string]string{},
		victimDigest: map[string]string{},
	}
	admin := s.users["admin"]
	admin.login(t, berthBin, "login")
	for _, f := range []struct {
		ns, name, first, second string
	}{
		{"a", "kafka", "2.5.0-1.3.1", "2.5.1-1.3.2"},
		{"b", "elastic", "7.0.0-0.2.0", "7.0.0-0.2.1"},
		{"pub", "cowsay", "0.2.0", ""},
	} {
		pkg := matrixPackage{name: f.name, from: kudoVersion(f.first), version: kudoVersion(f.first)}
		pkg.digest = admin.pushFixture(t, f.name, f.first, f.ns+"/"+f.name)
		m.digests[f.ns] = append(m.digests[f.ns], pkg.digest)
		if f.second != "" {
			pkg.version = kudoVersion(f.second)
			pkg.digest = admin.pushFixture(t, f.name, f.second, f.ns+"/"+f.name)
			m.digests[f.ns] = append(m.digests[f.ns], pkg.digest)
		}
		m.names[f.ns] = append(m.names[f.ns], f.name)
		m.fixture[f.ns] = pkg
		s.waitIndexed(t, f.ns+"/"+f.name, pkg.version)
	}

	alice := s.users["alice"].creds()
	expired := m.robot(t, alice, "expired", "2s", "pull")
	expiry := time.Now().Add(2 * time.Second)
	revoked := m.robot(t, alice, "revoked", "24h", "pull")
	if e := s.api(t, alice, "DELETE", "/api/v1/robots/a/revoked"); e.status/100 != 2 {
		t.Fatalf("revoke robot a/revoked: %s", e)
	}
	subjects := []*matrixSubject{
		{name: "anonymous", sees: []string{"pub"}},
		{name: "alice", creds: alice, sees: []string{"a", "pub"}, deletes: []string{"a"}},
		{name: "bob", creds: s.users["bob"].creds(), sees: []string{"b", "pub"}, deletes: []string{"b"}},
		{name: "robot-pull", creds: m.robot(t, alice, "reader", "24h", "pull"), sees: []string{"a", "pub"}},
		{name: "robot-push", creds: m.robot(t, alice, "pusher", "24h", "pull", "push"), sees: []string{"a", "pub"}},
		{name: "robot-expired", creds: expired},
		{name: "robot-revoked", creds: revoked},
		{name: "signer", creds: s.users["signer"].creds(), sees: []string{"a", "pub"}},
		{name: "admin", creds: admin.creds(), sees: []string{"a", "b", "pub"}, deletes: []string{"a", "b"}},
	}
	m.pushVictims(t, subjects)
	time.Sleep(time.Until(expiry.Add(time.Second)))

	rows, columns := parseMatrix(t, authMatrix)
	if want := matrixColumns(subjects); !slices.Equal(columns, want) {
		t.Fatalf("authMatrix columns %q, want %q", columns, want)
	}
	got := make([][]string, len(rows))
	for i, row := range rows {
		op := m.op(t, row.op)
		for j, sub := range subjects {
			o := op(sub)
			status := last(o.flow).status
			got[i] = append(got[i], strconv.Itoa(status))
			if !slices.Contains(row.want[j], status) {
				got[i][j] += "!"
				t.Errorf("%s as %s: %d, want %v\n%s", row.op, sub.name, status, row.want[j], flowString(o.flow))
			}
			m.check(t, row.op, sub, o)
		}
	}
	t.Log("statuses (! where not as authMatrix expects):\n" + formatMatrix(columns, rows, got))
}

// kudoVersion is the package version of a KUDO fixture folder.
func kudoVersion(folder string) string { return strings.Replace(folder, "-", "_", 1) }

// robot creates a robot of namespace a with the robots API as c, scoped
// to a/* and actions, and returns its credentials.
func (m *matrix) robot(t *testing.T, c creds, name, expiresIn string, actions ...string) creds {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"namespace": "a", "name": name, "expiresIn": expiresIn,
		"scopes": []map[string]any{{"repositories": []string{"a/*"}, "actions": actions}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := roundTrip(t, "POST", m.s.url()+"/api/v1/robots", c, "", http.Header{"Content-Type": {"application/json"}}, body)
	var doc struct{ Username, Secret string }
	if e.status != http.StatusCreated || json.Unmarshal(e.body, &doc) != nil || doc.Username != "robot+a+"+name || doc.Secret == "" {
		t.Fatalf("create robot a/%s: %s", name, e)
	}
	secrets.add(t, "the secret of robot a/"+name, doc.Secret)
	return creds{doc.Username, doc.Secret}
}

// pushVictims pushes, as admin, the packages the delete rows delete and
// waits until the catalog has them.
func (m *matrix) pushVictims(t *testing.T, subjects []*matrixSubject) {
	t.Helper()
	prefix := map[string]string{"a": "alfa", "b": "bravo"}
	push := func(key, ns, name string) {
		flow, digest := m.s.pushPlain(t, m.s.users["admin"].creds(), ns+"/"+name, "1.0.0")
		if last(flow).status != http.StatusCreated {
			t.Fatalf("push %s/%s as admin: %s", ns, name, flowString(flow))
		}
		m.victims[key] = name
		m.victimDigest[name] = digest
		m.names[ns] = append(m.names[ns], name)
		m.digests[ns] = append(m.digests[ns], digest)
	}
	for ns, p := range prefix {
		push(ns+"/standing", ns, p+"-standing")
		for _, sub := range subjects {
			if slices.Contains(sub.deletes, ns) {
				for _, row := range []string{"v2-delete", "api-delete"} {
					push(ns+"/"+sub.name+"/"+row, ns, p+"-"+sub.name+"-"+row)
				}
			}
		}
	}
	for ns := range prefix {
		for _, name := range m.names[ns] {
			if m.victimDigest[name] != "" {
				m.s.waitIndexed(t, ns+"/"+name, "1.0.0")
			}
		}
	}
}

// victim is the package sub deletes in row of namespace ns.
func (m *matrix) victim(sub *matrixSubject, ns, row string) string {
	if slices.Contains(sub.deletes, ns) {
		return m.victims[ns+"/"+sub.name+"/"+row]
	}
	return m.victims[ns+"/standing"]
}

// never is a name of the same length as name that was never created.
func never(name string) string { return "z" + name[1:] }

// op returns the operation of a row of authMatrix.
func (m *matrix) op(t *testing.T, row string) func(*matrixSubject) matrixOutcome {
	s := m.s
	v2 := func(sub *matrixSubject, method, path string, header http.Header) []hop {
		return s.registry(t, sub.creds, method, path, header, nil)
	}
	api := func(sub *matrixSubject, method, path string) []hop {
		return []hop{s.api(t, sub.creds, method, path)}
	}
	global := map[string]func(*matrixSubject) []hop{
		"catalog":    func(sub *matrixSubject) []hop { return v2(sub, "GET", "/v2/_catalog", nil) },
		"search":     func(sub *matrixSubject) []hop { return api(sub, "GET", "/api/v1/packages?limit=100") },
		"changes":    func(sub *matrixSubject) []hop { return api(sub, "GET", "/api/v1/changes") },
		"artifacts":  func(sub *matrixSubject) []hop { return api(sub, "GET", "/api/v1/artifacts") },
		"index":      func(sub *matrixSubject) []hop { return api(sub, "GET", "/index.yaml") },
		"helm-index": func(sub *matrixSubject) []hop { return api(sub, "GET", "/api/helm/index.yaml") },
		"metrics":    func(sub *matrixSubject) []hop { return api(sub, "GET", "/metrics") },
	}
	if f, ok := global[row]; ok {
		return func(sub *matrixSubject) matrixOutcome { return matrixOutcome{flow: f(sub)} }
	}
	ns, kind, ok := strings.Cut(row, ":")
	pkg := m.fixture[ns]
	// A request about one package, by name.
	named := map[string]func(sub *matrixSubject, name string) []hop{
		"manifest": func(sub *matrixSubject, name string) []hop {
			return v2(sub, "GET", "/v2/"+ns+"/"+name+"/manifests/"+pkg.version, manifestAccept)
		},
		"tags": func(sub *matrixSubject, name string) []hop {
			return v2(sub, "GET", "/v2/"+ns+"/"+name+"/tags/list", nil)
		},
		"referrers": func(sub *matrixSubject, name string) []hop {
			return v2(sub, "GET", "/v2/"+ns+"/"+name+"/referrers/"+pkg.digest, nil)
		},
		"show": func(sub *matrixSubject, name string) []hop { return api(sub, "GET", "/api/v1/packages/"+ns+"/"+name) },
		"version": func(sub *matrixSubject, name string) []hop {
			return api(sub, "GET", "/api/v1/packages/"+ns+"/"+name+"/versions/"+pkg.version)
		},
		"files": func(sub *matrixSubject, name string) []hop {
			return api(sub, "GET", "/api/v1/packages/"+ns+"/"+name+"/versions/"+pkg.version+"/files/operator.yaml")
		},
		"upgrades": func(sub *matrixSubject, name string) []hop {
			return api(sub, "GET", "/api/v1/packages/"+ns+"/"+name+"/upgrades?from="+pkg.from)
		},
	}
	// A request about a whole namespace.
	namespace := map[string]func(sub *matrixSubject, ns string) []hop{
		"ns-search":     func(sub *matrixSubject, ns string) []hop { return api(sub, "GET", "/api/v1/packages?namespace="+ns) },
		"ns-index":      func(sub *matrixSubject, ns string) []hop { return api(sub, "GET", "/"+ns+"/index.yaml") },
		"ns-helm-index": func(sub *matrixSubject, ns string) []hop { return api(sub, "GET", "/api/helm/"+ns+"/index.yaml") },
	}
	// A delete of a victim, by name.
	deletes := map[string]func(sub *matrixSubject, name, digest string) []hop{
		"v2-delete": func(sub *matrixSubject, name, digest string) []hop {
			return v2(sub, "DELETE", "/v2/"+ns+"/"+name+"/manifests/"+digest, nil)
		},
		"api-delete": func(sub *matrixSubject, name, _ string) []hop {
			return api(sub, "DELETE", "/api/v1/packages/"+ns+"/"+name)
		},
	}
	// What sub may not see is hidden from it; but a /v2/ client presents its
	// credentials only when challenged, and an unchallenged answer (public
	// reads) is what anonymous sees, whoever asked.
	hidden := func(sub *matrixSubject, flow []hop) bool {
		unchallenged := ns == "pub" && len(flow) == 1 && flow[0].status == http.StatusOK
		return !slices.Contains(sub.sees, ns) && !unchallenged
	}
	switch {
	case !ok:
	case named[kind] != nil:
		f := named[kind]
		return func(sub *matrixSubject) matrixOutcome {
			o := matrixOutcome{flow: f(sub, pkg.name), named: []string{pkg.name, pkg.digest}}
			if hidden(sub, o.flow) {
				o.name, o.never, o.twin = pkg.name, never(pkg.name), f(sub, never(pkg.name))
			}
			return o
		}
	case namespace[kind] != nil:
		f := namespace[kind]
		return func(sub *matrixSubject) matrixOutcome {
			o := matrixOutcome{flow: f(sub, ns)}
			if hidden(sub, o.flow) {
				o.twin = f(sub, never(ns))
			}
			return o
		}
	case deletes[kind] != nil:
		f := deletes[kind]
		return func(sub *matrixSubject) matrixOutcome {
			name := m.victim(sub, ns, kind)
			digest := m.victimDigest[name]
			o := matrixOutcome{flow: f(sub, name, digest), named: []string{name, digest}}
			if hidden(sub, o.flow) {
				o.name, o.never, o.twin = name, never(name), f(sub, never(name), digest)
			}
			return o
		}
	case kind == "push":
		return func(sub *matrixSubject) matrixOutcome {
			name := map[string]string{"a": "alfa", "b": "bravo"}[ns] + "-push-" + sub.name
			flow, digest := s.pushPlain(t, sub.creds, ns+"/"+name, "1.0.0")
			if last(flow).status == http.StatusCreated {
				m.names[ns] = append(m.names[ns], name)
				m.digests[ns] = append(m.digests[ns], digest)
			}
			return matrixOutcome{flow: flow, named: []string{name}}
		}
	}
	t.Fatalf("authMatrix: unknown operation %q", row)
	return nil
}

// check scans what o's requests got for the names and digests of the
// packages sub may not see, compares o with its twin, and checks what the
// listings list.
func (m *matrix) check(t *testing.T, row string, sub *matrixSubject, o matrixOutcome) {
	t.Helper()
	var hidden []string
	for _, ns := range slices.Sorted(maps.Keys(m.names)) {
		if !slices.Contains(sub.sees, ns) {
			hidden = append(hidden, m.names[ns]...)
			hidden = append(hidden, m.digests[ns]...)
		}
	}
	hidden = slices.DeleteFunc(hidden, func(s string) bool { return slices.Contains(o.named, s) })
	for _, h := range o.flow {
		text := hopText(h)
		for _, name := range hidden {
			if strings.Contains(text, name) {
				t.Errorf("%s as %s: the answer names %s, which %s may not see:\n%s", row, sub.name, name, sub.name, h)
			}
		}
	}
	if o.twin != nil {
		if diff := twinDiff(o.flow, o.twin, o.name, o.never); diff != "" {
			t.Errorf("%s as %s: the answer differs from the one for a name never created: %s\n%s\nversus\n%s",
				row, sub.name, diff, flowString(o.flow), flowString(o.twin))
		}
	}
	final := last(o.flow)
	if final.status != http.StatusOK {
		return
	}
	switch row {
	case "catalog":
		var doc struct{ Repositories []string }
		if err := json.Unmarshal(final.body, &doc); err != nil {
			t.Errorf("catalog as %s: %v\n%s", sub.name, err, final)
		}
		for _, ns := range sub.sees {
			if repo := ns + "/" + m.fixture[ns].name; !slices.Contains(doc.Repositories, repo) {
				t.Errorf("catalog as %s does not list %s: %q", sub.name, repo, doc.Repositories)
			}
		}
	case "search":
		var doc apiv1.SearchResponse
		if err := json.Unmarshal(final.body, &doc); err != nil {
			t.Errorf("search as %s: %v\n%s", sub.name, err, final)
		}
		want, counted := 0, 0
		for _, ns := range sub.sees {
			want += len(m.names[ns])
		}
		for ns, n := range doc.Facets.Namespace {
			counted += n
			if !slices.Contains(sub.sees, ns) {
				t.Errorf("search as %s: facet counts %d packages in namespace %s", sub.name, n, ns)
			}
		}
		if doc.Total != want || counted != want || len(doc.Packages) != want {
			t.Errorf("search as %s: total %d, namespace facets %d, %d packages; want %d (the packages of %v)",
				sub.name, doc.Total, counted, len(doc.Packages), want, sub.sees)
		}
	}
}

// hopText is everything an answer says: its headers, its body and, for a
// token, the token's claims.
func hopText(h hop) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h.header)) {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(h.header[k], ", "))
	}
	b.Write(h.body)
	b.WriteString(jwtClaims(tokenIn(h.body)))
	return b.String()
}

// volatileHeaders differ from one answer to the next whatever was asked.
var volatileHeaders = []string{"Date", "X-Request-Id", "Etag"}

// twinDiff says how flow differs from twin, the same requests for the
// never-created name never instead of name (or for another namespace, when
// name is ""); "" when they are the same. Tokens are compared by the access
// they grant.
func twinDiff(flow, twin []hop, name, never string) string {
	if len(flow) != len(twin) {
		return fmt.Sprintf("%d requests versus %d", len(flow), len(twin))
	}
	back := func(s string) string {
		if name == "" {
			return s
		}
		return strings.ReplaceAll(s, never, name)
	}
	for i, h := range flow {
		w := twin[i]
		if h.status != w.status {
			return fmt.Sprintf("request %d: status %d versus %d", i+1, h.status, w.status)
		}
		ignore := volatileHeaders
		if tok := tokenIn(h.body); tok != "" {
			if a, b := tokenAccess(tok), back(tokenAccess(tokenIn(w.body))); a != b {
				return fmt.Sprintf("request %d: the token grants %s versus %s", i+1, a, b)
			}
			ignore = append(slices.Clone(ignore), "Content-Length")
		} else if !bytes.Equal(h.body, []byte(back(string(w.body)))) {
			return fmt.Sprintf("request %d: the bodies differ", i+1)
		}
		for _, k := range slices.Sorted(maps.Keys(h.header)) {
			if !slices.Contains(ignore, k) && strings.Join(h.header[k], ", ") != back(strings.Join(w.header[k], ", ")) {
				return fmt.Sprintf("request %d: header %s: %q versus %q", i+1, k, h.header[k], w.header[k])
			}
		}
		for k := range w.header {
			if _, ok := h.header[k]; !ok && !slices.Contains(ignore, k) {
				return fmt.Sprintf("request %d: header %s only in the answer for %s", i+1, k, never)
			}
		}
	}
	return ""
}

// tokenAccess is the access claim of a JWT, as JSON.
func tokenAccess(tok string) string {
	var claims struct {
		Access json.RawMessage `json:"access"`
	}
	_ = json.Unmarshal([]byte(jwtClaims(tok)), &claims)
	return string(claims.Access)
}

func flowString(flow []hop) string {
	s := make([]string, len(flow))
	for i, h := range flow {
		s[i] = "  " + h.String()
	}
	return strings.Join(s, "\n")
}

// matrixRow is a row of authMatrix: an operation and the statuses each
// subject may get.
type matrixRow struct {
	op   string
	want [][]int
}

// parseMatrix reads authMatrix.
func parseMatrix(t *testing.T, doc string) (rows []matrixRow, columns []string) {
	t.Helper()
	codes := map[string][]int{"D": {401, 403}, "N": {404}, "A": {401, 404}}
	for i, line := range strings.Split(strings.TrimSpace(doc), "\n") {
		f := strings.Fields(line)
		if i == 0 {
			columns = f[1:]
			continue
		}
		if len(f) != len(columns)+1 {
			t.Fatalf("authMatrix row %q: %d cells, want %d", f[0], len(f)-1, len(columns))
		}
		row := matrixRow{op: f[0]}
		for _, c := range f[1:] {
			want, ok := codes[c]
			if n, err := strconv.Atoi(c); err == nil {
				want, ok = []int{n}, true
			}
			if !ok {
				t.Fatalf("authMatrix row %q: bad cell %q", f[0], c)
			}
			row.want = append(row.want, want)
		}
		rows = append(rows, row)
	}
	return rows, columns
}

func matrixColumns(subjects []*matrixSubject) []string {
	names := make([]string, len(subjects))
	for i, s := range subjects {
		names[i] = s.name
	}
	return names
}

// formatMatrix prints the statuses got in authMatrix's layout.
func formatMatrix(columns []string, rows []matrixRow, got [][]string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "op\t%s\n", strings.Join(columns, "\t"))
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r.op, strings.Join(got[i], "\t"))
	}
	tw.Flush()
	return b.String()
}
