package schemacheck

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The formats a result is checked against: ajv-formats' (3.0.1, "full"
// mode, MIT), as the TypeScript SDK's Ajv asserts them — its regular
// expressions as it writes them (ECMA-262, with its flags), its date and
// time rules, "byte" (base64), "int32" and "int64"; a format ajv-formats
// does not know is an annotation, as it is to Ajv.

// ajvPatterns are ajv-formats' regular expressions: source and flags.
var ajvPatterns = map[string]struct{ source, flags string }{
	"duration":                  {"^P(?!$)((\\d+Y)?(\\d+M)?(\\d+D)?(T(?=\\d)(\\d+H)?(\\d+M)?(\\d+S)?)?|(\\d+W)?)$", ""},
	"uri-reference":             {"^(?:[a-z][a-z0-9+\\-.]*:)?(?:\\/?\\/(?:(?:[a-z0-9\\-._~!$&'()*+,;=:]|%[0-9a-f]{2})*@)?(?:\\[(?:(?:(?:(?:[0-9a-f]{1,4}:){6}|::(?:[0-9a-f]{1,4}:){5}|(?:[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){4}|(?:(?:[0-9a-f]{1,4}:){0,1}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){3}|(?:(?:[0-9a-f]{1,4}:){0,2}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){2}|(?:(?:[0-9a-f]{1,4}:){0,3}[0-9a-f]{1,4})?::[0-9a-f]{1,4}:|(?:(?:[0-9a-f]{1,4}:){0,4}[0-9a-f]{1,4})?::)(?:[0-9a-f]{1,4}:[0-9a-f]{1,4}|(?:(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?)\\.){3}(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?))|(?:(?:[0-9a-f]{1,4}:){0,5}[0-9a-f]{1,4})?::[0-9a-f]{1,4}|(?:(?:[0-9a-f]{1,4}:){0,6}[0-9a-f]{1,4})?::)|[Vv][0-9a-f]+\\.[a-z0-9\\-._~!$&'()*+,;=:]+)\\]|(?:(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?)\\.){3}(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?)|(?:[a-z0-9\\-._~!$&'\"()*+,;=]|%[0-9a-f]{2})*)(?::\\d*)?(?:\\/(?:[a-z0-9\\-._~!$&'\"()*+,;=:@]|%[0-9a-f]{2})*)*|\\/(?:(?:[a-z0-9\\-._~!$&'\"()*+,;=:@]|%[0-9a-f]{2})+(?:\\/(?:[a-z0-9\\-._~!$&'\"()*+,;=:@]|%[0-9a-f]{2})*)*)?|(?:[a-z0-9\\-._~!$&'\"()*+,;=:@]|%[0-9a-f]{2})+(?:\\/(?:[a-z0-9\\-._~!$&'\"()*+,;=:@]|%[0-9a-f]{2})*)*)?(?:\\?(?:[a-z0-9\\-._~!$&'\"()*+,;=:@/?]|%[0-9a-f]{2})*)?(?:#(?:[a-z0-9\\-._~!$&'\"()*+,;=:@/?]|%[0-9a-f]{2})*)?$", "i"},
	"uri-template":              {"^(?:(?:[^\\x00-\\x20\"'<>%\\\\^`{|}]|%[0-9a-f]{2})|\\{[+#./;?&=,!@|]?(?:[a-z0-9_]|%[0-9a-f]{2})+(?::[1-9][0-9]{0,3}|\\*)?(?:,(?:[a-z0-9_]|%[0-9a-f]{2})+(?::[1-9][0-9]{0,3}|\\*)?)*\\})*$", "i"},
	"url":                       {"^(?:https?|ftp):\\/\\/(?:\\S+(?::\\S*)?@)?(?:(?!(?:10|127)(?:\\.\\d{1,3}){3})(?!(?:169\\.254|192\\.168)(?:\\.\\d{1,3}){2})(?!172\\.(?:1[6-9]|2\\d|3[0-1])(?:\\.\\d{1,3}){2})(?:[1-9]\\d?|1\\d\\d|2[01]\\d|22[0-3])(?:\\.(?:1?\\d{1,2}|2[0-4]\\d|25[0-5])){2}(?:\\.(?:[1-9]\\d?|1\\d\\d|2[0-4]\\d|25[0-4]))|(?:(?:[a-z0-9\\u{00a1}-\\u{ffff}]+-)*[a-z0-9\\u{00a1}-\\u{ffff}]+)(?:\\.(?:[a-z0-9\\u{00a1}-\\u{ffff}]+-)*[a-z0-9\\u{00a1}-\\u{ffff}]+)*(?:\\.(?:[a-z\\u{00a1}-\\u{ffff}]{2,})))(?::\\d{2,5})?(?:\\/[^\\s]*)?$", "iu"},
	"email":                     {"^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$", "i"},
	"hostname":                  {"^(?=.{1,253}\\.?$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\\.[a-z0-9](?:[-0-9a-z]{0,61}[0-9a-z])?)*\\.?$", "i"},
	"ipv4":                      {"^(?:(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$", ""},
	"ipv6":                      {"^((([0-9a-f]{1,4}:){7}([0-9a-f]{1,4}|:))|(([0-9a-f]{1,4}:){6}(:[0-9a-f]{1,4}|((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3})|:))|(([0-9a-f]{1,4}:){5}(((:[0-9a-f]{1,4}){1,2})|:((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3})|:))|(([0-9a-f]{1,4}:){4}(((:[0-9a-f]{1,4}){1,3})|((:[0-9a-f]{1,4})?:((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}))|:))|(([0-9a-f]{1,4}:){3}(((:[0-9a-f]{1,4}){1,4})|((:[0-9a-f]{1,4}){0,2}:((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}))|:))|(([0-9a-f]{1,4}:){2}(((:[0-9a-f]{1,4}){1,5})|((:[0-9a-f]{1,4}){0,3}:((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}))|:))|(([0-9a-f]{1,4}:){1}(((:[0-9a-f]{1,4}){1,6})|((:[0-9a-f]{1,4}){0,4}:((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}))|:))|(:(((:[0-9a-f]{1,4}){1,7})|((:[0-9a-f]{1,4}){0,5}:((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}))|:)))$", "i"},
	"uuid":                      {"^(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$", "i"},
	"json-pointer":              {"^(?:\\/(?:[^~/]|~0|~1)*)*$", ""},
	"json-pointer-uri-fragment": {"^#(?:\\/(?:[a-z0-9_\\-.!$&'()*+,;:=@]|%[0-9a-f]{2}|~0|~1)*)*$", "i"},
	"relative-json-pointer":     {"^(?:0|[1-9][0-9]*)(?:#|(?:\\/(?:[^~/]|~0|~1)*)*)$", ""},
	"uri":                       {"^(?:[a-z][a-z0-9+\\-.]*:)(?:\\/?\\/(?:(?:[a-z0-9\\-._~!$&'()*+,;=:]|%[0-9a-f]{2})*@)?(?:\\[(?:(?:(?:(?:[0-9a-f]{1,4}:){6}|::(?:[0-9a-f]{1,4}:){5}|(?:[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){4}|(?:(?:[0-9a-f]{1,4}:){0,1}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){3}|(?:(?:[0-9a-f]{1,4}:){0,2}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){2}|(?:(?:[0-9a-f]{1,4}:){0,3}[0-9a-f]{1,4})?::[0-9a-f]{1,4}:|(?:(?:[0-9a-f]{1,4}:){0,4}[0-9a-f]{1,4})?::)(?:[0-9a-f]{1,4}:[0-9a-f]{1,4}|(?:(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?)\\.){3}(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?))|(?:(?:[0-9a-f]{1,4}:){0,5}[0-9a-f]{1,4})?::[0-9a-f]{1,4}|(?:(?:[0-9a-f]{1,4}:){0,6}[0-9a-f]{1,4})?::)|[Vv][0-9a-f]+\\.[a-z0-9\\-._~!$&'()*+,;=:]+)\\]|(?:(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?)\\.){3}(?:25[0-5]|2[0-4]\\d|[01]?\\d\\d?)|(?:[a-z0-9\\-._~!$&'()*+,;=]|%[0-9a-f]{2})*)(?::\\d*)?(?:\\/(?:[a-z0-9\\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*|\\/(?:(?:[a-z0-9\\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})+(?:\\/(?:[a-z0-9\\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*)?|(?:[a-z0-9\\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})+(?:\\/(?:[a-z0-9\\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*)(?:\\?(?:[a-z0-9\\-._~!$&'()*+,;=:@/?]|%[0-9a-f]{2})*)?(?:#(?:[a-z0-9\\-._~!$&'()*+,;=:@/?]|%[0-9a-f]{2})*)?$", "i"},
	"byte":                      {"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$", "gm"},
	"date":                      {"^(\\d\\d\\d\\d)-(\\d\\d)-(\\d\\d)$", ""},
	"time":                      {"^(\\d\\d):(\\d\\d):(\\d\\d(?:\\.\\d+)?)(z|([+-])(\\d\\d)(?::?(\\d\\d))?)?$", "i"},
}

// ajvFormats are the formats Compile registers for Results.
var ajvFormats = func() []*jsonschema.Format {
	res := map[string]*regexp2.Regexp{}
	for name, p := range ajvPatterns {
		opts := regexp2.ECMAScript
		if strings.Contains(p.flags, "i") {
			opts |= regexp2.IgnoreCase
		}
		if strings.Contains(p.flags, "m") {
			opts |= regexp2.Multiline
		}
		if strings.Contains(p.flags, "u") {
			opts |= regexp2.Unicode
		}
		re := regexp2.MustCompile(p.source, opts)
		re.MatchTimeout = MatchTimeout
		res[name] = re
	}
	match := func(name, s string) bool {
		ok, err := res[name].MatchString(s)
		return err == nil && ok
	}
	str := func(name string, valid func(string) bool) *jsonschema.Format {
		return &jsonschema.Format{Name: name, Validate: func(v any) error {
			if s, ok := v.(string); ok && !valid(s) {
				return fmt.Errorf("not a valid %s", name)
			}
			return nil
		}}
	}
	num := func(name string, valid func(float64) bool) *jsonschema.Format {
		return &jsonschema.Format{Name: name, Validate: func(v any) error {
			if f, ok := number(v); ok && !valid(f) {
				return fmt.Errorf("not a valid %s", name)
			}
			return nil
		}}
	}
	var out []*jsonschema.Format
	for name := range ajvPatterns {
		switch name {
		case "uri", "date", "time":
			continue
		}
		out = append(out, str(name, func(s string) bool { return match(name, s) }))
	}
	date := func(s string) bool { return ajvDate(match, s) }
	out = append(out,
		str("uri", func(s string) bool { return strings.ContainsAny(s, "/:") && match("uri", s) }),
		str("date", date),
		str("time", func(s string) bool { return ajvTime(s, true) }),
		str("iso-time", func(s string) bool { return ajvTime(s, false) }),
		str("date-time", func(s string) bool { return ajvDateTime(match, s, true) }),
		str("iso-date-time", func(s string) bool { return ajvDateTime(match, s, false) }),
		num("int32", func(f float64) bool { return f == math.Trunc(f) && f >= math.MinInt32 && f <= math.MaxInt32 }),
		num("int64", func(f float64) bool { return f == math.Trunc(f) && !math.IsInf(f, 0) }),
	)
	// "regex" is the regular expression engine's (ecmaRegexp).
	// Formats santhosh-tekuri/jsonschema knows and ajv-formats does not:
	// annotations, as to Ajv.
	known := map[string]bool{"regex": true}
	for _, f := range out {
		known[f.Name] = true
	}
	for _, name := range formatNames {
		if !known[name] {
			out = append(out, &jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
		}
	}
	return out
}()

// formatNames are the formats santhosh-tekuri/jsonschema asserts on its
// own; for Arguments each is registered as an annotation.
var formatNames = []string{"json-pointer", "relative-json-pointer", "uuid", "duration", "period", "ipv4", "ipv6",
	"hostname", "email", "idn-email", "idn-hostname", "date", "time", "date-time", "uri", "iri", "uri-reference",
	"iri-reference", "uri-template", "semver", "regex"}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case interface{ Float64() (float64, error) }: // json.Number
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

var daysIn = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// ajvDate is ajv-formats' date: RFC 3339 full-date, the day within its
// month.
func ajvDate(match func(string, string) bool, s string) bool {
	if !match("date", s) {
		return false
	}
	y, _ := strconv.Atoi(s[0:4])
	m, _ := strconv.Atoi(s[5:7])
	d, _ := strconv.Atoi(s[8:10])
	if m < 1 || m > 12 || d < 1 {
		return false
	}
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return d <= 29
	}
	return d <= daysIn[m]
}

// ajvTimeRE takes ajv-formats' time apart (its TIME pattern).
var ajvTimeRE = regexp2.MustCompile(ajvPatterns["time"].source, regexp2.ECMAScript|regexp2.IgnoreCase)

// ajvTime is ajv-formats' time: with strictZone a zone is required; a
// leap second only at 23:59:60 UTC.
func ajvTime(s string, strictZone bool) bool {
	m, err := ajvTimeRE.FindStringMatch(s)
	if err != nil || m == nil {
		return false
	}
	g := func(i int) string { return m.GroupByNumber(i).String() }
	hr, _ := strconv.Atoi(g(1))
	mn, _ := strconv.Atoi(g(2))
	sec, _ := strconv.ParseFloat(g(3), 64)
	tz := g(4)
	sign := 1
	if g(5) == "-" {
		sign = -1
	}
	tzH, _ := strconv.Atoi(g(6))
	tzM, _ := strconv.Atoi(g(7))
	if tzH > 23 || tzM > 59 || strictZone && tz == "" {
		return false
	}
	if hr <= 23 && mn <= 59 && sec < 60 {
		return true
	}
	utcMin := mn - tzM*sign
	utcHr := hr - tzH*sign
	if utcMin < 0 {
		utcHr--
	}
	return (utcHr == 23 || utcHr == -1) && (utcMin == 59 || utcMin == -1) && sec < 61
}

// ajvDateTime is ajv-formats' date-time: a date and a time split at one
// "T", "t" or white space.
func ajvDateTime(match func(string, string) bool, s string, strictZone bool) bool {
	sep := func(r rune) bool { return r == 't' || r == 'T' || isJSSpace(r) }
	i := strings.IndexFunc(s, sep)
	if i < 0 || strings.IndexFunc(s[i+1:], sep) >= 0 {
		return false
	}
	_, size := utf8.DecodeRuneInString(s[i:])
	return ajvDate(match, s[:i]) && ajvTime(s[i+size:], strictZone)
}

// isJSSpace is ECMA-262's \s.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}
