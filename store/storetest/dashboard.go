package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testDashboard runs the dashboard reads' part of the conformance suite.
func testDashboard(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	hour := Epoch.Truncate(time.Hour)

	t.Run("incident groups", func(t *testing.T) {
		s := open(t)
		add := func(id string, at time.Duration, typ string, status int, code, provider, fp, msg string) {
			inc := store.Incident{ID: id, Time: hour.Add(at), Workspace: "w", Project: "p", Type: typ, StatusCode: status,
				Code: code, Provider: provider, Fingerprint: fp, Message: msg}
			mustAdd(t, s, &inc)
		}
		add("a1", 5*time.Minute, store.TypeHTTPError, 429, "", "openai", "f429", "rate limited 1")
		add("a3", 7*time.Minute, store.TypeHTTPError, 429, "", "openai", "f429", "rate limited 3")
		add("a2", 9*time.Minute, store.TypeHTTPError, 429, "", "openai", "f429", "rate limited 2")
		add("b1", 10*time.Minute, store.TypeToolError, 0, "", "", "fsyn", "SyntaxError 1")
		add("b2", 70*time.Minute, store.TypeToolError, 0, "", "", "fsyn", "SyntaxError 2")
		add("c1", 75*time.Minute, store.TypeLoop, 0, "stop", "", "floop", "loop of shell")
		add("c2", 76*time.Minute, store.TypeLoop, 0, "guard", "", "floop", "loop of shell")
		add("d1", 3*time.Hour, store.TypeTimeout, 0, "", "anthropic", "ft", "slow")
		// Another tenant: never counted.
		other := store.Incident{ID: "z1", Time: hour.Add(time.Minute), Workspace: "w", Project: "other", Type: store.TypeHTTPError, StatusCode: 429, Provider: "openai", Fingerprint: "f429", Message: "x"}
		mustAdd(t, s, &other)

		got, err := s.IncidentGroups(ctx, store.GroupQuery{Workspace: "w", Project: "p"})
		if err != nil {
			t.Fatal(err)
		}
		want := []store.IncidentGroup{
			{Hour: hour, Type: store.TypeHTTPError, StatusCode: 429, Provider: "openai", Fingerprint: "f429", Count: 3, SampleID: "a3", Sample: "rate limited 3"},
			{Hour: hour, Type: store.TypeToolError, Fingerprint: "fsyn", Count: 1, SampleID: "b1", Sample: "SyntaxError 1"},
			{Hour: hour.Add(time.Hour), Type: store.TypeLoop, Code: "guard", Fingerprint: "floop", Count: 1, SampleID: "c2", Sample: "loop of shell"},
			{Hour: hour.Add(time.Hour), Type: store.TypeLoop, Code: "stop", Fingerprint: "floop", Count: 1, SampleID: "c1", Sample: "loop of shell"},
			{Hour: hour.Add(time.Hour), Type: store.TypeToolError, Fingerprint: "fsyn", Count: 1, SampleID: "b2", Sample: "SyntaxError 2"},
			{Hour: hour.Add(3 * time.Hour), Type: store.TypeTimeout, Provider: "anthropic", Fingerprint: "ft", Count: 1, SampleID: "d1", Sample: "slow"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("groups:\n got %+v\nwant %+v", got, want)
		}

		// Since and Until bound the range: [hour+9m, hour+3h).
		got, err = s.IncidentGroups(ctx, store.GroupQuery{Workspace: "w", Project: "p", Since: hour.Add(9 * time.Minute), Until: hour.Add(3 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		var counts []string
		for _, g := range got {
			counts = append(counts, fmt.Sprintf("%s/%s:%d", g.Type, g.Code, g.Count))
		}
		if fmt.Sprint(counts) != "[http_error/:1 tool_error/:1 loop/guard:1 loop/stop:1 tool_error/:1]" {
			t.Fatalf("bounded groups: %v", counts)
		}

		got, err = s.IncidentGroups(ctx, store.GroupQuery{Workspace: "nobody", Project: "p"})
		if err != nil || len(got) != 0 {
			t.Fatalf("empty tenant: %v %v", got, err)
		}
		if _, err := s.IncidentGroups(ctx, store.GroupQuery{Workspace: "w"}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("no project: %v", err)
		}
	})

	t.Run("search incidents", func(t *testing.T) {
		s := open(t)
		for i := range 30 {
			inc := store.Incident{Time: hour.Add(time.Duration(i) * time.Minute), Workspace: "w", Project: "p",
				Session: []string{"s1", "s2", "s3"}[i%3], Provider: []string{"openai", "anthropic"}[i%2],
				Model: []string{"m1", "m2"}[i%2], Type: []string{store.TypeHTTPError, store.TypeToolError, store.TypeTimeout}[i%3],
				Fingerprint: fmt.Sprintf("fp%d", i%5), Message: fmt.Sprintf("m%02d", i)}
			mustAdd(t, s, &inc)
		}
		other := store.Incident{Time: hour, Workspace: "w2", Project: "p", Session: "s1", Type: store.TypeHTTPError, Message: "other"}
		mustAdd(t, s, &other)

		// all pages of f, joined
		walk := func(f store.IncidentFilter) (string, int) {
			t.Helper()
			var msgs []string
			pages := 0
			for {
				page, err := s.SearchIncidents(ctx, f)
				if err != nil {
					t.Fatalf("%+v: %v", f, err)
				}
				pages++
				for _, inc := range page.Incidents {
					if inc.Workspace != "w" || inc.Project != "p" {
						t.Fatalf("other tenant: %+v", inc)
					}
					msgs = append(msgs, inc.Message)
				}
				if page.Next == "" {
					return fmt.Sprint(msgs), pages
				}
				if pages > 40 {
					t.Fatal("paging does not end")
				}
				f.Cursor = page.Next
			}
		}
		for _, tc := range []struct {
			name  string
			f     store.IncidentFilter
			want  string
			pages int
		}{
			{"all in pages of 7", store.IncidentFilter{Limit: 7}, "[m29 m28 m27 m26 m25 m24 m23 m22 m21 m20 m19 m18 m17 m16 m15 m14 m13 m12 m11 m10 m09 m08 m07 m06 m05 m04 m03 m02 m01 m00]", 5},
			{"session in pages of 4", store.IncidentFilter{Session: "s2", Limit: 4}, "[m28 m25 m22 m19 m16 m13 m10 m07 m04 m01]", 3},
			{"type and provider", store.IncidentFilter{Type: store.TypeToolError, Provider: "openai"}, "[m28 m22 m16 m10 m04]", 1},
			{"model", store.IncidentFilter{Model: "m2", Limit: 5}, "[m29 m27 m25 m23 m21 m19 m17 m15 m13 m11 m09 m07 m05 m03 m01]", 3},
			{"fingerprints", store.IncidentFilter{Fingerprints: []string{"fp0", "fp3"}}, "[m28 m25 m23 m20 m18 m15 m13 m10 m08 m05 m03 m00]", 1},
			{"time range", store.IncidentFilter{Since: hour.Add(5 * time.Minute), Until: hour.Add(9 * time.Minute)}, "[m08 m07 m06 m05]", 1},
			{"session, time range and type", store.IncidentFilter{Session: "s1", Type: store.TypeHTTPError, Since: hour.Add(3 * time.Minute), Until: hour.Add(13 * time.Minute), Limit: 1}, "[m12 m09 m06 m03]", 4},
			{"nothing", store.IncidentFilter{Session: "none"}, "[]", 1},
			{"exact page", store.IncidentFilter{Type: store.TypeTimeout, Limit: 10}, "[m29 m26 m23 m20 m17 m14 m11 m08 m05 m02]", 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.f.Workspace, tc.f.Project = "w", "p"
				got, pages := walk(tc.f)
				if got != tc.want || pages != tc.pages {
					t.Fatalf("got %s in %d pages, want %s in %d", got, pages, tc.want, tc.pages)
				}
			})
		}
		if _, err := s.SearchIncidents(ctx, store.IncidentFilter{Workspace: "w", Project: "p", Cursor: "not a cursor"}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("bad cursor: %v", err)
		}
		if _, err := s.SearchIncidents(ctx, store.IncidentFilter{Project: "p"}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("no workspace: %v", err)
		}
	})
}
