package pkgformat

import (
	"errors"
	"path"
	"regexp"
	"strings"
)

// kudoOperator is KUDO's operator.yaml (kudo.dev/v1beta1).
type kudoOperator struct {
	Name              string       `yaml:"name"`
	Description       string       `yaml:"description"`
	OperatorVersion   string       `yaml:"operatorVersion"`
	AppVersion        string       `yaml:"appVersion"`
	KubernetesVersion string       `yaml:"kubernetesVersion"`
	URL               string       `yaml:"url"`
	Maintainers       []Maintainer `yaml:"maintainers"`
	Tasks             []kudoTask   `yaml:"tasks"`
}

// kudoTask is a task of operator.yaml; KudoOperator tasks, which install
// another operator, matter to the metadata, and Pipe tasks to rendering.
type kudoTask struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Package         string `yaml:"package"`
		AppVersion      string `yaml:"appVersion"`
		OperatorVersion string `yaml:"operatorVersion"`
		// Pipe are the files a Pipe task makes into ConfigMaps or
		// Secrets, which templates name as .Pipes.<key>.
		Pipe []struct {
			Key string `yaml:"key"`
		} `yaml:"pipe"`
	} `yaml:"spec"`
}

// kudoVersion is KUDO's package version: "<appVersion>_<operatorVersion>" when
// appVersion is set (KUDO names such a tarball kafka-2.5.1_1.3.2.tgz), else
// operatorVersion.
func kudoVersion(appVersion, operatorVersion string) string {
	if appVersion == "" {
		return operatorVersion
	}
	return appVersion + "_" + operatorVersion
}

// readKUDO reads a KUDO operator package: operator.yaml for the identity, the
// templates for the CRDs, RBAC rules and images as written, and the
// templates rendered with params.yaml's defaults for the images it runs
// (kudoImages).
func readKUDO(pf *pkgFiles) (*parsed, error) {
	const file = kudoOperatorFile
	var op kudoOperator
	if err := decodeYAML(file, pf.data(file), pf.yaml, &op); err != nil {
		return nil, err
	}
	op.Name, op.OperatorVersion, op.AppVersion = strings.TrimSpace(op.Name), strings.TrimSpace(op.OperatorVersion), strings.TrimSpace(op.AppVersion)
	if op.Name == "" {
		return nil, invalid(file, "missing required field name")
	}
	if op.OperatorVersion == "" {
		return nil, invalid(file, "missing required field operatorVersion")
	}
	md := &Metadata{
		Format:          KUDO,
		Name:            op.Name,
		Version:         kudoVersion(op.AppVersion, op.OperatorVersion),
		AppVersion:      op.AppVersion,
		OperatorVersion: op.OperatorVersion,
		Description:     strings.TrimSpace(op.Description),
		MinKubeVersion:  strings.TrimSpace(op.KubernetesVersion),
		Maintainers:     op.Maintainers,
	}
	if url := strings.TrimSpace(op.URL); url != "" {
		md.Links = append(md.Links, Link{Name: "Home", URL: url})
		md.Source = url
	}
	for _, t := range op.Tasks {
		if t.Kind == "KudoOperator" && t.Spec.Package != "" {
			md.RequiredPackages = append(md.RequiredPackages, PackageRequirement{
				Name:         path.Base(strings.TrimSuffix(t.Spec.Package, "/")),
				VersionRange: kudoVersion(t.Spec.AppVersion, t.Spec.OperatorVersion),
			})
		}
	}
	objs, err := templateObjects(pf, "templates")
	if err != nil {
		return nil, err
	}
	md.ProvidedAPIs, md.Permissions, md.RelatedImages = objs.provided, objs.permissions(), objs.images
	if md.Images, md.ImagesIncomplete, err = pf.kudoImages(&op); err != nil {
		return nil, err
	}
	return &parsed{md: md, nameFile: file, versionFile: file}, nil
}

// templateObjects reads the objects of the Go-templated YAML files under dir
// (KUDO's and Helm's templates) without rendering them: each file is read
// once its actions are blanked out (untemplate), and a file that is not YAML
// then is skipped. What a template builds from its values, or only under a
// condition, is therefore read as written, or not at all.
func templateObjects(pf *pkgFiles, dir string) (objects, error) {
	var objs objects
	for _, f := range yamlFiles(pf.under(dir)) {
		var o objects
		if err := o.addFile(f.Path, untemplate(f.Data), pf.yaml); err != nil {
			if errors.Is(err, ErrLimit) || pf.yaml.ctx.Err() != nil {
				return objects{}, err // a limit of the package, or the end of its reading
			}
			continue // a template that is not YAML once its actions are blanked out: nothing to extract
		}
		objs.merge(o)
	}
	return objs, nil
}

// templatePlaceholder replaces a Go template action inside a line of a
// template so that the rest of the line still reads as YAML.
const templatePlaceholder = "berth-template-value"

// templateAction matches one Go template action on one line.
var templateAction = regexp.MustCompile(`\{\{.*?\}\}`)

// untemplate turns a Go-templated YAML file into plain YAML good enough for
// extracting metadata: lines that hold only actions ({{ if }}, {{ end }}...)
// are dropped and actions inside a line become templatePlaceholder. The result
// describes no real object; it is only read for CRDs, RBAC rules and images.
func untemplate(data []byte) []byte {
	lines := strings.Split(string(data), "\n")
	out := lines[:0]
	for _, line := range lines {
		if !strings.Contains(line, "{{") {
			out = append(out, line)
			continue
		}
		if strings.TrimSpace(templateAction.ReplaceAllString(line, "")) == "" {
			continue
		}
		out = append(out, templateAction.ReplaceAllString(line, templatePlaceholder))
	}
	return []byte(strings.Join(out, "\n"))
}
