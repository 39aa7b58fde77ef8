//go:build tools

// Package versitygw pins versitygw, the S3 gateway that berth's end-to-end
// tests put berth's s3 storage in front of (`make tools` builds it into
// bin/versitygw). It is a module of its own so that versitygw's dependencies
// never enter berth's go.mod.
package versitygw

import _ "github.com/versity/versitygw/cmd/versitygw"
