package pkgformat

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// objectHeader is what every Kubernetes object starts with.
type objectHeader struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
}

// crdObject is the part of a CustomResourceDefinition berth indexes
// (apiextensions v1 and v1beta1).
type crdObject struct {
	Spec struct {
		Group string `yaml:"group"`
		Names struct {
			Kind   string `yaml:"kind"`
			Plural string `yaml:"plural"`
		} `yaml:"names"`
		Version  string `yaml:"version"`
		Versions []struct {
			Name string `yaml:"name"`
		} `yaml:"versions"`
	} `yaml:"spec"`
}

// listObject is a v1 List.
type listObject struct {
	Items []yaml.Node `yaml:"items"`
}

// roleObject is a Role or ClusterRole.
type roleObject struct {
	Rules []rbacRule `yaml:"rules"`
}

// rbacRule is a Kubernetes RBAC PolicyRule as written in YAML.
type rbacRule struct {
	APIGroups       []string `yaml:"apiGroups"`
	Resources       []string `yaml:"resources"`
	ResourceNames   []string `yaml:"resourceNames"`
	Verbs           []string `yaml:"verbs"`
	NonResourceURLs []string `yaml:"nonResourceURLs"`
}

func (r rbacRule) policyRule() PolicyRule {
	return PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames,
		Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs}
}

// policyRules converts RBAC rules read from YAML.
func policyRules(rules []rbacRule) []PolicyRule {
	out := make([]PolicyRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.policyRule())
	}
	return out
}

// objects collects what berth indexes from plain Kubernetes objects: the
// CRDs they define, the RBAC rules they grant and the images they run.
type objects struct {
	provided []API
	cluster  []PolicyRule
	ns       []PolicyRule
	images   []string
	// found are the images with where each was found.
	found imageSet
	// clusterAdmin and namespaceAdmin: a ClusterRoleBinding, or a
	// RoleBinding, binds the built-in cluster-admin ClusterRole.
	clusterAdmin, namespaceAdmin bool
}

// addFile reads every object of a YAML file. Errors name file and wrap
// ErrInvalid or ErrLimit, or the budget's context error.
func (o *objects) addFile(file string, data []byte, b *yamlBudget) error {
	return eachYAMLDocument(file, data, b, func(doc *yaml.Node) error { return o.add(file, doc) })
}

// add reads one object (or the items of a List).
func (o *objects) add(file string, n *yaml.Node) error {
	var h objectHeader
	if err := decodeNode(file, n, &h); err != nil {
		return err
	}
	switch h.Kind {
	case "List":
		var l listObject
		if err := decodeNode(file, n, &l); err != nil {
			return err
		}
		for i := range l.Items {
			if err := o.add(file, &l.Items[i]); err != nil {
				return err
			}
		}
	case "CustomResourceDefinition":
		var crd crdObject
		if err := decodeNode(file, n, &crd); err != nil {
			return err
		}
		o.provided = append(o.provided, crd.apis()...)
	case "ClusterRole", "Role":
		var r roleObject
		if err := decodeNode(file, n, &r); err != nil {
			return err
		}
		if h.Kind == "ClusterRole" {
			o.cluster = append(o.cluster, policyRules(r.Rules)...)
		} else {
			o.ns = append(o.ns, policyRules(r.Rules)...)
		}
	case "ClusterRoleBinding", "RoleBinding":
		var b bindingObject
		if err := decodeNode(file, n, &b); err != nil {
			return err
		}
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "cluster-admin" {
			if h.Kind == "ClusterRoleBinding" {
				o.clusterAdmin = true
			} else {
				o.namespaceAdmin = true
			}
		}
	default:
		o.images = appendImages(o.images, n)
		o.found.addContainers(n, fmt.Sprintf("%s: %s %s", file, h.Kind, orUnnamed(mappingValue(mappingNode(n, "metadata"), "name"))))
	}
	return nil
}

// bindingObject is a RoleBinding or ClusterRoleBinding.
type bindingObject struct {
	RoleRef struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	} `yaml:"roleRef"`
}

// clusterAdminRules are the rules of Kubernetes' built-in cluster-admin
// ClusterRole, which a package that binds it asks for without defining it:
// everything on every resource and, bound cluster-wide, every URL.
// It returns new slices, which the package's normalisation may sort.
func clusterAdminRules() []PolicyRule {
	return []PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}},
	}
}

// merge adds what other collected.
func (o *objects) merge(other objects) {
	o.provided = append(o.provided, other.provided...)
	o.cluster = append(o.cluster, other.cluster...)
	o.ns = append(o.ns, other.ns...)
	o.images = append(o.images, other.images...)
	o.found.merge(other.found)
	o.clusterAdmin = o.clusterAdmin || other.clusterAdmin
	o.namespaceAdmin = o.namespaceAdmin || other.namespaceAdmin
}

// permissions returns the collected RBAC rules, with cluster-admin's where
// it is bound, or nil when there are none.
func (o *objects) permissions() *Permissions {
	cluster, ns := o.cluster, o.ns
	if o.clusterAdmin {
		cluster = append(slices.Clip(cluster), clusterAdminRules()...)
	}
	if o.namespaceAdmin {
		ns = append(slices.Clip(ns), clusterAdminRules()[0])
	}
	if len(cluster) == 0 && len(ns) == 0 {
		return nil
	}
	return &Permissions{Cluster: cluster, Namespaced: ns}
}

// apis lists the group, versions and kind a CRD defines.
func (c crdObject) apis() []API {
	versions := []string{c.Spec.Version}
	for _, v := range c.Spec.Versions {
		versions = append(versions, v.Name)
	}
	var out []API
	for _, v := range versions {
		if v != "" && c.Spec.Group != "" && c.Spec.Names.Kind != "" {
			out = append(out, API{Group: c.Spec.Group, Version: v, Kind: c.Spec.Names.Kind, Plural: c.Spec.Names.Plural})
		}
	}
	return out
}

// mappingNode returns the value of key in mapping n (or in the document n
// holds), or an empty node.
func mappingNode(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
	}
	return &yaml.Node{}
}
