//go:build tools

// Package opm pins the operator-registry opm CLI that berth's end-to-end
// tests drive (`make tools` builds it into bin/opm). It is a module of its
// own so that operator-registry's dependencies never enter berth's go.mod.
package opm

import _ "github.com/operator-framework/operator-registry/cmd/opm"
