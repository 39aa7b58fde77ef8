package pkgformat

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// createdLayouts are the layouts of an OLM CSV's createdAt annotation seen in
// real packages, tried in order (a fractional second is accepted after the
// seconds of any of them). Times without a zone are UTC.
var createdLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05Z0700",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04Z07:00",
	"2006-01-02T15-04-05Z07:00",
	"2006-01-02-T15:04:05Z07:00",
	"2006-01-02:15:04:05",
	"2006-01-02",
	"2006/01/02",
	time.UnixDate,
}

// zoneOffsets are the zone abbreviations found in createdAt values written by
// `date`, with their offsets in seconds. Go would otherwise take an unknown
// abbreviation as UTC, or use the host's zone database for a known one.
var zoneOffsets = map[string]int{
	"UTC": 0, "GMT": 0,
	"EST": -5 * 3600, "EDT": -4 * 3600,
	"CST": -6 * 3600, "CDT": -5 * 3600,
	"MST": -7 * 3600, "MDT": -6 * 3600,
	"PST": -8 * 3600, "PDT": -7 * 3600,
	"CET": 1 * 3600, "CEST": 2 * 3600,
	"IST": 5*3600 + 1800,
}

// numericDate matches day and month in either order, then a four-digit year.
var numericDate = regexp.MustCompile(`^(\d{1,2})[/-](\d{1,2})[/-](\d{4})$`)

// parseCreated reads an OLM createdAt value into a UTC time. It returns nil
// when the value is empty or in no known layout, and for a day/month date
// that reads validly both ways (03-01-2021).
func parseCreated(s string) *time.Time {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	for _, layout := range createdLayouts {
		t, err := time.ParseInLocation(layout, s, time.UTC)
		if err != nil {
			continue
		}
		if layout == time.UnixDate {
			name, _ := t.Zone()
			offset, ok := zoneOffsets[name]
			if !ok {
				return nil
			}
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.FixedZone(name, offset))
		}
		t = t.UTC()
		return &t
	}
	return parseNumericDate(s)
}

// parseNumericDate reads dd-mm-yyyy or mm/dd/yyyy when only one reading is a
// valid date.
func parseNumericDate(s string) *time.Time {
	m := numericDate.FindStringSubmatch(s)
	if m == nil {
		return nil
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	year, _ := strconv.Atoi(m[3])
	valid := func(month, day int) bool {
		if month < 1 || month > 12 || day < 1 {
			return false
		}
		return time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).Day() == day
	}
	var t time.Time
	switch dayFirst, monthFirst := valid(b, a), valid(a, b); {
	case dayFirst && monthFirst && a != b:
		return nil
	case monthFirst:
		t = time.Date(year, time.Month(a), b, 0, 0, 0, 0, time.UTC)
	case dayFirst:
		t = time.Date(year, time.Month(b), a, 0, 0, 0, 0, time.UTC)
	default:
		return nil
	}
	return &t
}
