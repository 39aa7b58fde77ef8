package deploy

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// The parts of Kubernetes objects the tests read, in the API's field names.

type meta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

// object is one document of a rendering: its kind and name, and the whole
// document for decoding as that kind.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata meta   `yaml:"metadata"`
	doc      *yaml.Node
}

type selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type workload struct { // a Deployment or a StatefulSet
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		Selector selector `yaml:"selector"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type podSpec struct {
	EnableServiceLinks *bool           `yaml:"enableServiceLinks"`
	SecurityContext    securityContext `yaml:"securityContext"`
	Containers         []container     `yaml:"containers"`
	Volumes            []volume        `yaml:"volumes"`
}

type securityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env          []envVar `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
	StartupProbe    *probe          `yaml:"startupProbe"`
	LivenessProbe   *probe          `yaml:"livenessProbe"`
	ReadinessProbe  *probe          `yaml:"readinessProbe"`
	SecurityContext securityContext `yaml:"securityContext"`
}

type probe struct {
	HTTPGet *struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`   // a number or a port's name
		Scheme string `yaml:"scheme"` // HTTP (the default) or HTTPS
	} `yaml:"httpGet"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
	EmptyDir              *struct{} `yaml:"emptyDir"`
	PersistentVolumeClaim *claim    `yaml:"persistentVolumeClaim"`
}

type claim struct {
	ClaimName string `yaml:"claimName"`
}

type configMap struct {
	Data map[string]string `yaml:"data"`
}

type secret struct {
	Data       map[string]string `yaml:"data"` // base64
	StringData map[string]string `yaml:"stringData"`
}

type service struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type labelSelected struct { // a PodDisruptionBudget
	Spec struct {
		Selector selector `yaml:"selector"`
	} `yaml:"spec"`
}

type serviceMonitor struct {
	Spec struct {
		Selector  selector `yaml:"selector"`
		Endpoints []struct {
			Port      string         `yaml:"port"`
			Path      string         `yaml:"path"`
			Scheme    string         `yaml:"scheme"`
			TLSConfig map[string]any `yaml:"tlsConfig"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

type ingress struct {
	Spec struct {
		Rules []struct {
			Host string `yaml:"host"`
			HTTP struct {
				Paths []struct {
					Path    string `yaml:"path"`
					Backend struct {
						Service struct {
							Name string `yaml:"name"`
							Port struct {
								Name string `yaml:"name"`
							} `yaml:"port"`
						} `yaml:"service"`
					} `yaml:"backend"`
				} `yaml:"paths"`
			} `yaml:"http"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

// parseObjects reads the documents of a multi-document YAML stream, skipping
// empty ones (Helm separates templates that render nothing with "---").
func parseObjects(t *testing.T, b []byte) []object {
	t.Helper()
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("parsing the rendered YAML: %v", err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		o := object{doc: &doc}
		if err := doc.Decode(&o); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("a document without kind or metadata.name (line %d)", doc.Content[0].Line)
		}
		o.checkSchema(t)
		objs = append(objs, o)
	}
}

// apiTypes are the Kubernetes API's types of the kinds the chart and the
// manifests use (the ServiceMonitor's is the Prometheus Operator's, not
// among them).
var apiTypes = map[string]func() any{
	"ConfigMap":             func() any { return new(corev1.ConfigMap) },
	"Deployment":            func() any { return new(appsv1.Deployment) },
	"Ingress":               func() any { return new(networkingv1.Ingress) },
	"NetworkPolicy":         func() any { return new(networkingv1.NetworkPolicy) },
	"PersistentVolumeClaim": func() any { return new(corev1.PersistentVolumeClaim) },
	"PodDisruptionBudget":   func() any { return new(policyv1.PodDisruptionBudget) },
	"Secret":                func() any { return new(corev1.Secret) },
	"Service":               func() any { return new(corev1.Service) },
	"ServiceAccount":        func() any { return new(corev1.ServiceAccount) },
	"StatefulSet":           func() any { return new(appsv1.StatefulSet) },
}

// checkSchema decodes o strictly into its API type, as the API server reads
// it: a misspelt field or a value of the wrong type fails the test.
func (o object) checkSchema(t *testing.T) {
	t.Helper()
	newType, ok := apiTypes[o.Kind]
	if !ok {
		return
	}
	if err := o.decodeAPI(newType()); err != nil {
		t.Errorf("%s %s: %v", o.Kind, o.Metadata.Name, err)
	}
}

// decodeAPI decodes o strictly into v, a Kubernetes API type.
func (o object) decodeAPI(v any) error {
	b, err := yaml.Marshal(o.doc)
	if err != nil {
		return err
	}
	return sigsyaml.UnmarshalStrict(b, v)
}

// decode decodes o as the kind-specific type of v.
func (o object) decode(t *testing.T, v any) {
	t.Helper()
	if err := o.doc.Decode(v); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Metadata.Name, err)
	}
}

// ofKind returns the objects of kind.
func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// find returns the object of kind named name.
func find(objs []object, kind, name string) (object, bool) {
	for _, o := range ofKind(objs, kind) {
		if o.Metadata.Name == name {
			return o, true
		}
	}
	return object{}, false
}
