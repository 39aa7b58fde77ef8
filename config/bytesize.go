package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a number of bytes, written in YAML and in BERTH_* variables
// as a plain integer or with a unit: "10GiB", "500MiB", "1.5GB", "4096".
// The binary units (KiB, MiB, GiB, TiB) are powers of 1024, the decimal
// ones (KB, MB, GB, TB) powers of 1000; K, M, G and T alone are binary.
type ByteSize int64

// byteUnits are the units ByteSize reads, longest first so that "GiB" is
// not read as "B".
var byteUnits = []struct {
	suffix string
	factor float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// UnmarshalText reads a size as ByteSize documents.
func (b *ByteSize) UnmarshalText(text []byte) error {
	n, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = n
	return nil
}

// ParseByteSize reads s as ByteSize documents. It refuses negative sizes,
// fractions of a byte and sizes beyond 8 EiB, naming what it got.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	factor := 1.0
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, factor = strings.TrimSpace(rest), u.factor
			break
		}
	}
	bad := fmt.Errorf("want a size such as 10GiB, 500MiB or 4096 (got %q)", s)
	if t == "" {
		return 0, bad
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 {
			return 0, bad
		}
		v := float64(n) * factor
		if v >= 1<<63 {
			return 0, bad
		}
		return ByteSize(n * int64(factor)), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*factor >= 1<<63 || f*factor != float64(int64(f*factor)) {
		return 0, bad
	}
	return ByteSize(f * factor), nil
}

// String writes b with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.factor == 0 {
			return strconv.FormatInt(int64(b)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// Human writes b for people: "212 B", or one decimal of the largest binary
// unit below it ("1.5 MiB", up to PiB). The CLI and the web UI show sizes so.
func (b ByteSize) Human() string {
	const unit = 1024
	n := int64(b)
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
