package store

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// FuzzJobListCursor: the tasks/list cursor a client sends back is decoded
// without panics; one that decodes names a positive time and a well-formed
// job ID, encodes back to a cursor that decodes the same, and makes a list
// position of the fixed shape (19 digits, "/", the ID), so that the range
// read from it stays within the caller's prefix. Any cursor ListJobs makes
// decodes to what it was made of.
func FuzzJobListCursor(f *testing.F) {
	valid := jobListCursor{CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(), ID: JobIDPrefix + strings.Repeat("A", 26)}
	for _, s := range []string{
		valid.String(), "", "garbage", "e30", base64.RawURLEncoding.EncodeToString([]byte(`{"c":-1,"i":"job_AAAAAAAAAAAAAAAAAAAAAAAAAA"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"c":1,"i":"job_AAAAAAAAAAAAAAAAAAAAAAAAAA/../x"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"c":9223372036854775807,"i":"job_` + strings.Repeat("Z", 64) + `"}`)),
		base64.StdEncoding.EncodeToString([]byte(`{"c":1,"i":"job_AAAAAAAAAAAAAAAAAAAAAAAAAA"}`)),
	} {
		f.Add(s, valid.CreatedAt, valid.ID)
	}
	f.Fuzz(func(t *testing.T, s string, created int64, id string) {
		if c, err := parseJobListCursor(s); err == nil {
			if c.CreatedAt <= 0 || !wellFormedID(c.ID, JobIDPrefix) {
				t.Fatalf("cursor %q decodes to %+v", s, c)
			}
			if again, err := parseJobListCursor(c.String()); err != nil || again != c {
				t.Fatalf("cursor %q: %+v re-encodes to one that decodes to %+v, %v", s, c, again, err)
			}
			pos := jobListPos(time.Unix(0, c.CreatedAt), c.ID)
			digits, rest, _ := strings.Cut(pos, "/")
			if len(digits) != 19 || strings.Trim(digits, "0123456789") != "" || rest != c.ID {
				t.Fatalf("cursor %q makes the list position %q", s, pos)
			}
		} else if !strings.Contains(err.Error(), "after:") {
			t.Fatalf("cursor %q: error %q does not name the parameter", s, err)
		}
		if created > 0 && wellFormedID(id, JobIDPrefix) {
			made := jobListCursor{CreatedAt: created, ID: id}
			if got, err := parseJobListCursor(made.String()); err != nil || got != made {
				t.Fatalf("cursor of %+v decodes to %+v, %v", made, got, err)
			}
		}
	})
}
