package deploy

import (
	"bytes"
	"path"
	"reflect"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/testpki"
)

// TestHelmRendersAreStable: two renders of the same values are byte for byte
// the same, so a GitOps controller sees no change where there is none: the
// chart generates no secret.
func TestHelmRendersAreStable(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		minimal,
		append([]string{"--set", "config.auth.service=berth"}, minimal...),
		{"--values", scaleOutValues},
		{"--values", scaleOutValues, "--set", "config.auth.service=berth,tokenKey.existingSecret=berth-token-key"},
		{"--values", tlsValues},
		{"--values", scaleOutValues, "--set", sourcesSet + ",provenanceKey.existingSecret=berth-provenance-key,provenanceKey.passwordKey=password"},
	} {
		var first []byte
		for range 2 {
			out, err := helm(t, append([]string{"template", "berth", chart}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = out
			} else if !bytes.Equal(first, out) {
				t.Errorf("values %v: two renders differ", args)
			}
		}
	}
}

// TestHelmTLS: with tls.enabled berth serves HTTPS from the kubernetes.io/tls
// Secret mounted whole (so renewals reach it), client certificates verified
// against the client CA Secret, and the Service port, the probes, the
// ingress's backend and the ServiceMonitor all speak HTTPS.
func TestHelmTLS(t *testing.T) {
	t.Parallel()
	serverCA, err := testpki.NewCA("berth test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := serverCA.Issue(testpki.Options{Hosts: []string{"berth.berth.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	clientCA, err := testpki.NewCA("clients")
	if err != nil {
		t.Fatal(err)
	}
	objs := render(t, "--values", tlsValues)
	d := checkDeployment(t, objs, chartImage(t), cluster{
		"berth-tls":       {"tls.crt": string(server.CertPEM), "tls.key": string(server.KeyPEM), "ca.crt": string(serverCA.PEM)},
		"berth-client-ca": {"ca.crt": string(clientCA.PEM)},
		"berth-auth":      {"htpasswd": "alice:$2y$05$abcdefghijklmnopqrstuu5Kc3bqSOKYmKkdTwtb3ZVE3/ONYFrOu\n"},
	})
	tc := d.config.HTTP.TLS
	if !tc.Enabled() {
		t.Fatal("http.tls.certificate is not set")
	}
	for file, want := range map[string]string{tc.Certificate: "berth-tls", tc.Key: "berth-tls", tc.ClientCA: "berth-client-ca"} {
		if v := d.mounts[path.Dir(file)]; v.Secret == nil || v.Secret.SecretName != want {
			t.Errorf("%s is not in the mounted Secret %s", file, want)
		}
	}
	if path.Base(tc.Certificate) != "tls.crt" || path.Base(tc.Key) != "tls.key" {
		t.Errorf("http.tls certificate %s, key %s: want the kubernetes.io/tls keys tls.crt and tls.key", tc.Certificate, tc.Key)
	}
	if tc.MinVersion != "1.3" || tc.ClientAuth != config.ClientAuthIfGiven {
		t.Errorf("http.tls minVersion %q, clientAuth %q: want 1.3 as tls.minVersion says, and berth's default, %s", tc.MinVersion, tc.ClientAuth, config.ClientAuthIfGiven)
	}
	if d.config.Catalog.PublicURL != "https://berth.example.com" {
		t.Errorf("catalog.publicURL %q, want https://berth.example.com from the ingress", d.config.Catalog.PublicURL)
	}

	var svc service
	ofKind(objs, "Service")[0].decode(t, &svc)
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Name != "https" || p[0].TargetPort != "https" {
		t.Errorf("Service ports %+v, want one named https", p)
	}
	var ing ingress
	ofKind(objs, "Ingress")[0].decode(t, &ing)
	for _, r := range ing.Spec.Rules {
		if n := r.HTTP.Paths[0].Backend.Service.Port.Name; n != "https" {
			t.Errorf("ingress host %s: backend port %q, want https", r.Host, n)
		}
	}
	sms := ofKind(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want one", len(sms))
	}
	var sm serviceMonitor
	sms[0].decode(t, &sm)
	if e := sm.Spec.Endpoints; len(e) != 1 || e[0].Port != "https" || e[0].Scheme != "https" || e[0].TLSConfig == nil {
		t.Errorf("ServiceMonitor endpoints %+v, want port https, scheme https and a tlsConfig", e)
	}

	plain := render(t, minimal...)
	var ps service
	ofKind(plain, "Service")[0].decode(t, &ps)
	if p := ps.Spec.Ports; len(p) != 1 || p[0].Name != "http" {
		t.Errorf("without TLS: Service ports %+v, want one named http", p)
	}
}

// TestHelmNetworkPolicy: the NetworkPolicy, on by default, selects berth's
// pods, admits its port from anywhere or from the peers given, and lets
// them out to DNS and, as configured, to PostgreSQL, the object store and
// the OIDC issuers' key sets, nowhere else.
func TestHelmNetworkPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		from   int   // peers admitted; 0: anywhere
		egress []int // ports besides DNS
	}{
		{"defaults", minimal, 0, nil},
		{"scale-out", []string{"--values", scaleOutValues}, 0, []int{5432, 443}},
		{"MinIO in the cluster", []string{"--values", scaleOutValues, "--set", "config.storage.s3.regionEndpoint=http://minio.minio.svc:9000"}, 0, []int{5432, 9000}},
		{"S3 with the cloud's credentials", []string{"--values", scaleOutValues, "--set", "s3.existingSecret="}, 0, []int{5432, 443, 80}},
		{"OIDC", append([]string{"--set", "config.auth.oidc[0].issuer=https://ci.example.com,config.auth.oidc[0].jwksURL=https://ci.example.com:8443/keys"}, minimal...), 0, []int{8443}},
		{"TLS behind the ingress", []string{"--values", tlsValues}, 2, nil},
		{"a git source", append(minimal, withSources...), 0, []int{443}},
		{"sources over http and on other ports", append(minimal, "--set", sourcesSet+
			",config.namespaces[0].sources[1].package=etcd,config.namespaces[0].sources[1].kind=http,config.namespaces[0].sources[1].url=http://downloads.example.com/etcd.tgz"+
			",config.namespaces[0].sources[2].package=redis,config.namespaces[0].sources[2].kind=image,config.namespaces[0].sources[2].url=registry.example.com:5443/bundles/redis:v1"+
			",config.namespaces[1].name=*,config.namespaces[1].quota=1GiB"), 0, []int{443, 80, 5443}},
		{"sources on the ports given", append(minimal, "--set", sourcesSet+",networkPolicy.egress.sources.ports={8443}"), 0, []int{8443}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.args...)
			var w workload
			ofKind(objs, "Deployment")[0].decode(t, &w)
			if from, egress := checkNetworkPolicy(t, objs, w); from != tc.from || !slices.Equal(egress, tc.egress) {
				t.Errorf("ingress from %d peers, egress ports %v besides DNS; want %d and %v", from, egress, tc.from, tc.egress)
			}
		})
	}
	if n := len(ofKind(render(t, append([]string{"--set", "networkPolicy.enabled=false"}, minimal...)...), "NetworkPolicy")); n != 0 {
		t.Errorf("networkPolicy.enabled=false: %d NetworkPolicies, want none", n)
	}
}

// TestHelmNetworkPolicySources: with sources, egress reaches any public
// address on the sources' ports, but not the private, loopback and
// link-local ranges berth refuses to fetch from, unless
// config.sources.allowPrivate; networkPolicy.egress.sources.to replaces
// those peers.
func TestHelmNetworkPolicySources(t *testing.T) {
	t.Parallel()
	public := []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"}}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"fc00::/7", "fe80::/10"}}},
	}
	gateway := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}
	for _, tc := range []struct {
		name string
		set  string
		want []networkingv1.NetworkPolicyPeer // nil: anywhere
	}{
		{"public addresses", sourcesSet, public},
		{"private addresses allowed", sourcesSet + ",config.sources.allowPrivate=true", nil},
		{"through an egress gateway", sourcesSet + ",networkPolicy.egress.sources.to[0].ipBlock.cidr=203.0.113.0/24", gateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var np networkingv1.NetworkPolicy
			if err := ofKind(render(t, append(minimal, "--set", tc.set)...), "NetworkPolicy")[0].decodeAPI(&np); err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
				return len(r.Ports) > 0 && r.Ports[0].Port.IntValue() == 443
			})
			if i < 0 {
				t.Fatalf("egress %+v: no rule for the sources on 443", np.Spec.Egress)
			}
			if to := np.Spec.Egress[i].To; !reflect.DeepEqual(to, tc.want) {
				t.Errorf("the sources' egress to %+v, want %+v", to, tc.want)
			}
		})
	}
}

// checkNetworkPolicy checks the one NetworkPolicy of objs: it selects the
// pods of w, admits berth's port and restricts egress, DNS included. It
// returns how many peers the port admits (0: anywhere) and the ports egress
// allows besides DNS, in order.
func checkNetworkPolicy(t *testing.T, objs []object, w workload) (from int, egress []int) {
	t.Helper()
	pols := ofKind(objs, "NetworkPolicy")
	if len(pols) != 1 {
		t.Fatalf("%d NetworkPolicies, want one", len(pols))
	}
	pod := w.Spec.Template
	var np networkingv1.NetworkPolicy
	if err := pols[0].decodeAPI(&np); err != nil {
		t.Fatal(err)
	}
	if !matches(selector{np.Spec.PodSelector.MatchLabels}, pod.Metadata.Labels) {
		t.Errorf("podSelector %v does not select berth's pods %v", np.Spec.PodSelector.MatchLabels, pod.Metadata.Labels)
	}
	port := pod.Spec.Containers[0].Ports[0]
	if in := np.Spec.Ingress; len(in) != 1 || len(in[0].Ports) != 1 ||
		(in[0].Ports[0].Port.String() != port.Name && in[0].Ports[0].Port.IntValue() != port.ContainerPort) {
		t.Fatalf("ingress %+v, want one rule for berth's port %s", in, port.Name)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Fatalf("policyTypes %v: egress is not restricted", np.Spec.PolicyTypes)
	}
	dns := false
	for _, r := range np.Spec.Egress {
		for _, p := range r.Ports {
			switch {
			case p.Port.IntValue() == 53:
				dns = len(r.To) > 0
			case !slices.Contains(egress, p.Port.IntValue()):
				egress = append(egress, p.Port.IntValue())
			}
		}
	}
	if !dns {
		t.Error("no egress rule to the cluster's DNS on port 53")
	}
	return len(np.Spec.Ingress[0].From), egress
}
