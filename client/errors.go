package client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// opError is an error of one operation on one reference. It unwraps to both
// the sentinel that classifies it and the underlying cause, so that callers
// can use errors.Is(err, ErrDenied) and errors.As(err, **errcode.ErrorResponse).
type opError struct {
	msg   string
	kind  error
	cause error
	// status is the HTTP status of an answer of the catalog API other than
	// the one expected; 0 otherwise.
	status int
}

func (e *opError) Error() string { return e.msg }

func (e *opError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

// wrapError describes err, which happened while doing op on ref (step, if not
// empty, says which part of it), and classifies it by a sentinel error.
func wrapError(op string, ref Reference, step string, err error) error {
	prefix := op + " " + ref.String()
	if step != "" {
		prefix += ": " + step
	}
	return classify(prefix, ref.Registry, err)
}

// classify describes err after prefix (what was being done) and classifies
// it by a sentinel error; registryHost names the registry for credential
// hints.
func classify(prefix, registryHost string, err error) error {
	prefix += ": "
	var resp *errcode.ErrorResponse
	switch {
	case errors.As(err, &resp):
		kind := responseKind(resp)
		return &opError{msg: prefix + kind.Error() + ": " + describeResponse(resp), kind: kind, cause: err}
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrNotPackage):
		return &opError{msg: prefix + err.Error(), cause: err}
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return &opError{msg: prefix + ErrUnauthorized.Error() + ": the registry asks for credentials and none are stored for " + registryHost +
			" (run berth login " + registryHost + ")", kind: ErrUnauthorized, cause: err}
	case errors.Is(err, errdef.ErrNotFound):
		return &opError{msg: prefix + ErrNotFound.Error(), kind: ErrNotFound, cause: err}
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, content.ErrInvalidDescriptorSize),
		isMismatch(err):
		return &opError{msg: prefix + ErrDigestMismatch.Error() + ": " + err.Error(), kind: ErrDigestMismatch, cause: err}
	}
	return &opError{msg: prefix + err.Error(), cause: err}
}

// isMismatch recognises the oras-go errors for a response whose
// Content-Length or Docker-Content-Digest contradicts the descriptor, which
// wrap no sentinel.
func isMismatch(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "mismatch Content-Length") || strings.Contains(msg, "digest mismatch in")
}

// responseKind classifies a registry error response by its codes and status.
func responseKind(resp *errcode.ErrorResponse) error {
	for _, e := range resp.Errors {
		switch e.Code {
		case errcode.ErrorCodeDenied:
			return ErrDenied
		case errcode.ErrorCodeUnauthorized:
			return ErrUnauthorized
		case errcode.ErrorCodeManifestUnknown, errcode.ErrorCodeNameUnknown, errcode.ErrorCodeBlobUnknown:
			return ErrNotFound
		}
	}
	switch resp.StatusCode {
	case http.StatusForbidden:
		return ErrDenied
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusNotFound:
		return ErrNotFound
	}
	return ErrRegistry
}

// describeResponse renders the registry's own messages, codes and status:
// "version 1.0.0 already exists as sha256:... (DENIED, HTTP 403)".
func describeResponse(resp *errcode.ErrorResponse) string {
	var msgs, codes []string
	for _, e := range resp.Errors {
		msgs = append(msgs, errorMessage(e.Message, e.Code, e.Detail))
		codes = append(codes, e.Code)
	}
	status := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if len(msgs) == 0 {
		return status + " " + http.StatusText(resp.StatusCode)
	}
	return strings.Join(msgs, "; ") + " (" + strings.Join(codes, ", ") + ", " + status + ")"
}

// errorMessage renders one error of an error body, the registry's or the
// catalog API's: its message, with its detail when that is text, else its
// code in words.
func errorMessage(message, code string, detail any) string {
	if d, ok := detail.(string); ok && d != "" {
		message += ": " + d
	}
	if message == "" {
		message = strings.ToLower(strings.ReplaceAll(code, "_", " "))
	}
	return message
}
