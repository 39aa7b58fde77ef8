package pkgformat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/berth-registry/berth/pkgformat/render"
)

// renderBudget is the render.Budget of the package's limits: the time and
// steps of Limits, MaxFileSize for what one template writes and for what
// they all write (what rendering adds to the package's files), and the
// package's context.
func (pf *pkgFiles) renderBudget() render.Budget {
	l := pf.yaml.limits
	return render.Budget{Steps: l.MaxRenderSteps, Output: l.MaxFileSize, Total: l.MaxFileSize, Timeout: l.RenderTimeout, Context: pf.yaml.ctx}
}

// renderedImages reads the images of what a package's templates rendered
// (res, or err when rendering could not start): every manifest rendered is
// read by the package's YAML reader, under its limits. It returns the
// images and, when some template did not render (or rendered no YAML), why
// the images may be incomplete.
//
// A template refused by render (its budget spent, a file outside the
// package read) refuses the package: the error names the template and wraps
// ErrLimit for a budget, ErrInvalid otherwise, or the context's error.
func (pf *pkgFiles) renderedImages(res *render.Result, err error) ([]Image, string, error) {
	switch {
	case errors.Is(err, render.ErrBudget):
		return nil, "", fmt.Errorf("%w: %w", err, ErrLimit)
	case errors.Is(err, render.ErrRefused):
		return nil, "", fmt.Errorf("%w: %w", err, ErrInvalid)
	case err != nil && pf.yaml.ctx.Err() != nil:
		return nil, "", err
	case err != nil:
		return nil, err.Error(), nil
	}
	var failures []render.Failure
	for _, f := range res.Failures {
		if IsManifestFile(f.Name) {
			failures = append(failures, f)
		}
	}
	var objs objects
	for _, out := range res.Outputs {
		if !IsManifestFile(out.Name) {
			continue
		}
		var o objects
		if err := o.addFile(out.Name, []byte(out.Text), pf.yaml); err != nil {
			if errors.Is(err, ErrLimit) || pf.yaml.ctx.Err() != nil {
				return nil, "", fmt.Errorf("%s as rendered: %w", out.Name, err)
			}
			failures = append(failures, render.Failure{Name: out.Name, Reason: "renders no valid YAML: " + strings.TrimPrefix(err.Error(), displayPath(out.Name)+": ")})
			continue
		}
		objs.merge(o)
	}
	return objs.found.list(), incompleteReason(failures), nil
}

// maxReason is the most of a template's failure kept in ImagesIncomplete.
const maxReason = 1000

// incompleteReason says which templates did not render with the default
// values: the first with its reason, and how many more.
func incompleteReason(failures []render.Failure) string {
	if len(failures) == 0 {
		return ""
	}
	first := failures[0]
	reason := first.Name + ": " + first.Reason
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "") + "..."
	}
	if more := len(failures) - 1; more > 0 {
		reason += fmt.Sprintf(" (and %d more templates)", more)
	}
	return reason
}
