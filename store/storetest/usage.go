package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testUsage checks token usage records: counts that every AddUsage adds
// to (one writer or many, one batch or several), read filtered, grouped,
// ordered and limited, pruned by hour, kept across a reopen.
func testUsage(t *testing.T, open Opener) {
	ctx := context.Background()
	fresh := func(t *testing.T) store.Store {
		s, _ := open(t)
		return s
	}

	t.Run("usage adds up", func(t *testing.T) {
		s := fresh(t)
		batch := []store.Usage{
			usage("c1", "openai", "gpt-4o", usageHour(0).Add(10*time.Minute), 1),
			usage("c1", "anthropic", "claude", usageHour(0).Add(20*time.Minute), 2),
			usage("", "openai", "gpt-4o", usageHour(1).Add(5*time.Minute), 4),
		}
		mustAddUsage(t, s, batch...)
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"},
			usage("", "openai", "gpt-4o", usageHour(1), 4),
			usage("c1", "anthropic", "claude", usageHour(0), 2),
			usage("c1", "openai", "gpt-4o", usageHour(0), 1))
		// The same records again add to the stored ones, and a new key
		// is a record of its own.
		mustAddUsage(t, s, batch...)
		mustAddUsage(t, s, usage("c1", "openai", "gpt-4o-mini", usageHour(0), 16))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"},
			usage("", "openai", "gpt-4o", usageHour(1), 8),
			usage("c1", "anthropic", "claude", usageHour(0), 4),
			usage("c1", "openai", "gpt-4o", usageHour(0), 2),
			usage("c1", "openai", "gpt-4o-mini", usageHour(0), 16))
		// Zero counts are a record too; an empty batch stores nothing.
		mustAddUsage(t, s, usage("c2", "openai", "gpt-4o", usageHour(2), 0))
		mustAddUsage(t, s)
		if got := mustListUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"}); len(got) != 5 {
			t.Fatalf("%d records after a zero record and an empty batch, want 5:\n%s", len(got), usageText(got))
		}
	})

	t.Run("usage duplicates in one batch", func(t *testing.T) {
		s := fresh(t)
		mustAddUsage(t, s,
			usage("c", "openai", "gpt-4o", usageHour(0).Add(time.Minute), 1),
			usage("c", "openai", "gpt-4o", usageHour(1), 8),
			usage("c", "openai", "gpt-4o", usageHour(1).Add(-time.Nanosecond), 2),
			usage("c", "openai", "gpt-4o", usageHour(0).Add(30*time.Minute).In(time.FixedZone("IST", 5*3600+1800)), 4))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"},
			usage("c", "openai", "gpt-4o", usageHour(1), 8),
			usage("c", "openai", "gpt-4o", usageHour(0), 7))
	})

	t.Run("usage hour is the UTC hour", func(t *testing.T) {
		s := fresh(t)
		// 09:40 UTC, given as 15:10 in UTC+05:30: its local hour (15:00,
		// 09:30 UTC) is not an hour of UTC.
		ist := time.Date(2025, 3, 14, 15, 10, 0, 0, time.FixedZone("IST", 5*3600+1800))
		// 09:59:59.999 UTC, given in UTC-04:00.
		edt := time.Date(2025, 3, 14, 5, 59, 59, 999_000_000, time.FixedZone("EDT", -4*3600))
		mustAddUsage(t, s, usage("c", "openai", "gpt-4o", ist, 1))
		mustAddUsage(t, s, usage("c", "openai", "gpt-4o", edt, 2))
		want := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
		got := expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"}, usage("c", "openai", "gpt-4o", want, 3))
		if !got[0].Hour.Equal(want) || got[0].Hour.Location() != time.UTC {
			t.Fatalf("Hour = %v, want %v", got[0].Hour, want)
		}
		for _, by := range []string{store.UsageByHour, store.UsageByConversation, store.UsageByModel} {
			got := mustListUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", By: by})
			if len(got) != 1 || !got[0].Hour.Equal(want) || got[0].Hour.Location() != time.UTC {
				t.Fatalf("By %s: %s", by, usageText(got))
			}
		}
	})

	t.Run("usage invalid", func(t *testing.T) {
		s := fresh(t)
		valid := usage("c", "openai", "gpt-4o", usageHour(0), 1)
		negative := func(set func(u *store.Usage)) store.Usage {
			u := usage("c", "openai", "gpt-4o", usageHour(0), 1)
			set(&u)
			return u
		}
		tests := []struct {
			name string
			bad  store.Usage
		}{
			{"no workspace", usageIn("", "p", valid)},
			{"no project", usageIn("w", "", valid)},
			{"negative requests", negative(func(u *store.Usage) { u.Requests = -1 })},
			{"negative input", negative(func(u *store.Usage) { u.Input = -1 })},
			{"negative output", negative(func(u *store.Usage) { u.Output = -1 })},
			{"negative cache read", negative(func(u *store.Usage) { u.CacheRead = -1 })},
			{"negative cache write", negative(func(u *store.Usage) { u.CacheWrite = -1 })},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				// The valid records of the batch are not stored either.
				batch := []store.Usage{valid, usageIn("w", "q", valid), tt.bad}
				if err := s.AddUsage(ctx, batch); !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("AddUsage err = %v, want ErrInvalid", err)
				}
			})
		}
		queries := []struct {
			name string
			q    store.UsageQuery
		}{
			{"list without workspace", store.UsageQuery{Project: "p"}},
			{"list without project", store.UsageQuery{Workspace: "w"}},
			{"list by an unknown grouping", store.UsageQuery{Workspace: "w", Project: "p", By: "day"}},
		}
		for _, tt := range queries {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := s.ListUsage(ctx, tt.q); !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("ListUsage err = %v, want ErrInvalid", err)
				}
			})
		}
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"})
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "q"})
	})

	t.Run("usage overflow", func(t *testing.T) {
		s := fresh(t)
		full := usage("c", "openai", "gpt-4o", usageHour(0), 1)
		full.Output = math.MaxInt64
		mustAddUsage(t, s, full)
		other := usage("d", "openai", "gpt-4o", usageHour(0), 1)
		half := usage("e", "openai", "gpt-4o", usageHour(0), 1)
		half.Input = math.MaxInt64/2 + 1
		tests := []struct {
			name  string
			batch []store.Usage
		}{
			{"added to a stored record", []store.Usage{other, usage("c", "openai", "gpt-4o", usageHour(0), 1)}},
			{"within one batch", []store.Usage{other, half, half}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.AddUsage(ctx, tt.batch); !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("AddUsage err = %v, want ErrInvalid", err)
				}
			})
		}
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"}, full)
	})

	t.Run("usage tenants", func(t *testing.T) {
		s := fresh(t)
		// Tenants whose names run together alike, names holding U+0000
		// (stored, and found, as U+FFFD).
		tenants := [][2]string{{"w", "p"}, {"w", "q"}, {"v", "p"}, {"w", "pq"}, {"wp", "q"},
			{"a\x00b", "c"}, {"a", "b\x00c"}}
		var batch []store.Usage
		for i, tn := range tenants {
			batch = append(batch, usageIn(tn[0], tn[1], usage("c\x00d", "openai", "gpt-4o", usageHour(i), int64(i+1))))
		}
		mustAddUsage(t, s, batch...)
		for i, tn := range tenants {
			ws, proj := strings.ReplaceAll(tn[0], "\x00", "\uFFFD"), strings.ReplaceAll(tn[1], "\x00", "\uFFFD")
			want := usageIn(ws, proj, usage("c\uFFFDd", "openai", "gpt-4o", usageHour(i), int64(i+1)))
			expectUsage(t, s, store.UsageQuery{Workspace: tn[0], Project: tn[1]}, want)
			expectUsage(t, s, store.UsageQuery{Workspace: ws, Project: proj, Conversation: "c\x00d"}, want)
			for _, by := range []string{store.UsageByHour, store.UsageByConversation, store.UsageByModel} {
				if got := mustListUsage(t, s, store.UsageQuery{Workspace: tn[0], Project: tn[1], By: by}); len(got) != 1 ||
					got[0].Workspace != ws || got[0].Project != proj || got[0].Requests != int64(i+1) {
					t.Fatalf("%q/%q by %s:\n%s", tn[0], tn[1], by, usageText(got))
				}
			}
		}
		expectUsage(t, s, store.UsageQuery{Workspace: "nobody", Project: "p"})
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "nobody", By: store.UsageByModel})
	})

	t.Run("usage of one conversation", func(t *testing.T) {
		s := fresh(t)
		mustAddUsage(t, s,
			usage("c", "openai", "m2", usageHour(0), 1),
			usage("c", "openai", "m1", usageHour(0), 2),
			usage("c", "openai", "m1", usageHour(2), 4),
			usage("c1", "openai", "m1", usageHour(1), 8),
			usage("", "openai", "m1", usageHour(1), 16),
			usage("b", "openai", "m1", usageHour(3), 32),
			usageIn("w", "q", usage("c", "openai", "m1", usageHour(1), 64)))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c"},
			usage("c", "openai", "m1", usageHour(2), 4),
			usage("c", "openai", "m1", usageHour(0), 2),
			usage("c", "openai", "m2", usageHour(0), 1))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c1"},
			usage("c1", "openai", "m1", usageHour(1), 8))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c", Since: usageHour(1)},
			usage("c", "openai", "m1", usageHour(2), 4))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c", Until: usageHour(2)},
			usage("c", "openai", "m1", usageHour(0), 2),
			usage("c", "openai", "m2", usageHour(0), 1))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c", By: store.UsageByModel},
			usage("", "openai", "m1", usageHour(2), 6),
			usage("", "openai", "m2", usageHour(0), 1))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "nobody"})
	})

	t.Run("usage since until", func(t *testing.T) {
		s := fresh(t)
		for i := range 5 {
			mustAddUsage(t, s, usage("c", "openai", "gpt-4o", usageHour(i), 1<<i),
				usage("d", "openai", "gpt-4o", usageHour(i), 1<<(i+5)))
		}
		ist := time.FixedZone("IST", 5*3600+1800)
		tests := []struct {
			name         string
			since, until time.Time
			want         []int // hours, newest first
		}{
			{"unbounded", time.Time{}, time.Time{}, []int{4, 3, 2, 1, 0}},
			{"since an hour", usageHour(1), time.Time{}, []int{4, 3, 2, 1}},
			{"since within an hour", usageHour(1).Add(30 * time.Minute), time.Time{}, []int{4, 3, 2}},
			{"since a nanosecond after an hour", usageHour(1).Add(time.Nanosecond), time.Time{}, []int{4, 3, 2}},
			{"until an hour", time.Time{}, usageHour(3), []int{2, 1, 0}},
			{"until a nanosecond after an hour", time.Time{}, usageHour(3).Add(time.Nanosecond), []int{3, 2, 1, 0}},
			{"both", usageHour(1), usageHour(3), []int{2, 1}},
			{"in another zone", usageHour(2).In(ist), usageHour(3).In(ist), []int{2}},
			{"until before since", usageHour(3), usageHour(1), nil},
			{"after the last hour", usageHour(5), time.Time{}, nil},
			{"before the first hour", time.Time{}, usageHour(0), nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var want, wantC, wantHours []store.Usage
				for _, h := range tt.want {
					c := usage("c", "openai", "gpt-4o", usageHour(h), 1<<h)
					d := usage("d", "openai", "gpt-4o", usageHour(h), 1<<(h+5))
					want = append(want, c, d)
					wantC = append(wantC, c)
					wantHours = append(wantHours, usage("", "", "", usageHour(h), 1<<h+1<<(h+5)))
				}
				q := store.UsageQuery{Workspace: "w", Project: "p", Since: tt.since, Until: tt.until}
				expectUsage(t, s, q, want...)
				q.By = store.UsageByHour
				expectUsage(t, s, q, wantHours...)
				q.By, q.Conversation = "", "c"
				expectUsage(t, s, q, wantC...)
			})
		}
	})

	t.Run("usage by", func(t *testing.T) {
		s := fresh(t)
		mustAddUsage(t, s,
			usage("c1", "openai", "gpt-4o", usageHour(0), 1),
			usage("c1", "anthropic", "claude", usageHour(0), 2),
			usage("c2", "openai", "gpt-4o", usageHour(0), 4),
			usage("c2", "openai", "gpt-4o", usageHour(1), 8),
			usage("", "openai", "gpt-4o", usageHour(1), 16),
			usage("c1", "openai", "gpt-4o-mini", usageHour(3), 32),
			usageIn("w", "q", usage("c1", "openai", "gpt-4o", usageHour(4), 64)))
		tests := []struct {
			name string
			q    store.UsageQuery
			want []store.Usage
		}{
			{"hour", store.UsageQuery{By: store.UsageByHour}, []store.Usage{
				usage("", "", "", usageHour(3), 32),
				usage("", "", "", usageHour(1), 24),
				usage("", "", "", usageHour(0), 7),
			}},
			{"conversation", store.UsageQuery{By: store.UsageByConversation}, []store.Usage{
				usage("c1", "", "", usageHour(3), 35),
				usage("", "", "", usageHour(1), 16),
				usage("c2", "", "", usageHour(1), 12),
			}},
			{"model", store.UsageQuery{By: store.UsageByModel}, []store.Usage{
				usage("", "openai", "gpt-4o-mini", usageHour(3), 32),
				usage("", "openai", "gpt-4o", usageHour(1), 29),
				usage("", "anthropic", "claude", usageHour(0), 2),
			}},
			{"conversation since", store.UsageQuery{By: store.UsageByConversation, Since: usageHour(1)}, []store.Usage{
				usage("c1", "", "", usageHour(3), 32),
				usage("", "", "", usageHour(1), 16),
				usage("c2", "", "", usageHour(1), 8),
			}},
			{"model until", store.UsageQuery{By: store.UsageByModel, Until: usageHour(1)}, []store.Usage{
				usage("", "anthropic", "claude", usageHour(0), 2),
				usage("", "openai", "gpt-4o", usageHour(0), 5),
			}},
			{"model of one conversation", store.UsageQuery{By: store.UsageByModel, Conversation: "c1"}, []store.Usage{
				usage("", "openai", "gpt-4o-mini", usageHour(3), 32),
				usage("", "anthropic", "claude", usageHour(0), 2),
				usage("", "openai", "gpt-4o", usageHour(0), 1),
			}},
			{"hour of one conversation", store.UsageQuery{By: store.UsageByHour, Conversation: "c2"}, []store.Usage{
				usage("", "", "", usageHour(1), 8),
				usage("", "", "", usageHour(0), 4),
			}},
			{"conversation limited", store.UsageQuery{By: store.UsageByConversation, Limit: 2}, []store.Usage{
				usage("c1", "", "", usageHour(3), 35),
				usage("", "", "", usageHour(1), 16),
			}},
			{"hour limited", store.UsageQuery{By: store.UsageByHour, Limit: 2}, []store.Usage{
				usage("", "", "", usageHour(3), 32),
				usage("", "", "", usageHour(1), 24),
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.q.Workspace, tt.q.Project = "w", "p"
				expectUsage(t, s, tt.q, tt.want...)
			})
		}
	})

	t.Run("usage order", func(t *testing.T) {
		s := fresh(t)
		// Byte order, not a language's: "B" < "_" < "a" < "ab" < "b" < "é".
		// Names of different lengths, names that start others.
		want := []store.Usage{
			usage("a", "openai", "gpt-4o", usageHour(2), 1),
			usage("", "openai", "gpt-4o", usageHour(1), 2),
			usage("B", "openai", "gpt-4o", usageHour(1), 3),
			usage("_", "openai", "gpt-4o", usageHour(1), 4),
			usage("a", "Openai", "gpt-4o", usageHour(1), 5),
			usage("a", "openai", "gpt-4", usageHour(1), 6),
			usage("a", "openai", "gpt-4o", usageHour(1), 7),
			usage("a", "openai", "gpt-4o-mini", usageHour(1), 8),
			usage("a", "openai2", "gpt-4", usageHour(1), 9),
			usage("ab", "openai", "gpt-4o", usageHour(1), 10),
			usage("b", "a", "z", usageHour(1), 11),
			usage("é", "openai", "gpt-4o", usageHour(1), 12),
			usage("a", "openai", "gpt-4o", usageHour(0), 13),
		}
		shuffled := slices.Clone(want)
		slices.Reverse(shuffled)
		shuffled[0], shuffled[5] = shuffled[5], shuffled[0]
		mustAddUsage(t, s, shuffled...)
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"}, want...)
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Limit: 4}, want[:4]...)
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "a"},
			want[0], want[4], want[5], want[6], want[7], want[8], want[12])
	})

	t.Run("usage limit", func(t *testing.T) {
		s := fresh(t)
		// Record i: hour i/100, conversation i%100; listed from the
		// newest hour, conversations ascending.
		const n = store.MaxLimit + 50
		batch := make([]store.Usage, n)
		for i := range batch {
			batch[i] = usage(fmt.Sprintf("c%03d", i%100), "openai", "gpt-4o", usageHour(i/100), 1)
		}
		mustAddUsage(t, s, batch...)
		var all []store.Usage
		for h := (n - 1) / 100; h >= 0; h-- {
			for c := range 100 {
				if i := h*100 + c; i < n {
					all = append(all, batch[i])
				}
			}
		}
		tests := []struct {
			name  string
			limit int
			want  int
		}{
			{"zero means 1000", 0, 1000},
			{"negative means 1000", -1, 1000},
			{"small", 7, 7},
			{"one", 1, 1},
			{"capped at MaxLimit", store.MaxLimit + 20, store.MaxLimit},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Limit: tt.limit}, all[:tt.want]...)
			})
		}
		if got := mustListUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", By: store.UsageByHour}); len(got) != n/100+1 ||
			got[0].Requests != 50 || got[1].Requests != 100 || !got[0].Hour.Equal(usageHour(n/100)) {
			t.Fatalf("by hour: %d records, first %+v", len(got), got[0])
		}
		if got := mustListUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", By: store.UsageByConversation, Limit: 3}); len(got) != 3 ||
			got[0].Conversation != "c000" || got[2].Conversation != "c002" || got[0].Requests != int64(n/100+1) {
			t.Fatalf("by conversation, limit 3:\n%s", usageText(got))
		}
	})

	t.Run("usage prune", func(t *testing.T) {
		s := fresh(t)
		for _, tn := range [][2]string{{"w", "p"}, {"v", "q"}} {
			for h := range 4 {
				mustAddUsage(t, s, usageIn(tn[0], tn[1], usage("c", "openai", "gpt-4o", usageHour(h), 1)),
					usageIn(tn[0], tn[1], usage("", "openai", "gpt-4o", usageHour(h), 2)))
			}
		}
		prune := func(t *testing.T, before time.Time, want int) {
			t.Helper()
			if n, err := s.PruneUsage(ctx, before); n != want || err != nil {
				t.Fatalf("PruneUsage(%v) = %d, %v; want %d", before, n, err, want)
			}
		}
		prune(t, time.Time{}, 0)
		prune(t, usageHour(0), 0)
		prune(t, usageHour(2), 8) // hours 0 and 1, two records each, two tenants
		prune(t, usageHour(2), 0)
		for _, tn := range [][2]string{{"w", "p"}, {"v", "q"}} {
			expectUsage(t, s, store.UsageQuery{Workspace: tn[0], Project: tn[1]},
				usageIn(tn[0], tn[1], usage("", "openai", "gpt-4o", usageHour(3), 2)),
				usageIn(tn[0], tn[1], usage("c", "openai", "gpt-4o", usageHour(3), 1)),
				usageIn(tn[0], tn[1], usage("", "openai", "gpt-4o", usageHour(2), 2)),
				usageIn(tn[0], tn[1], usage("c", "openai", "gpt-4o", usageHour(2), 1)))
			expectUsage(t, s, store.UsageQuery{Workspace: tn[0], Project: tn[1], Conversation: "c"},
				usageIn(tn[0], tn[1], usage("c", "openai", "gpt-4o", usageHour(3), 1)),
				usageIn(tn[0], tn[1], usage("c", "openai", "gpt-4o", usageHour(2), 1)))
		}
		// An hour that started before before goes, though it ends after.
		prune(t, usageHour(2).Add(time.Nanosecond), 4)
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c"},
			usage("c", "openai", "gpt-4o", usageHour(3), 1))
		prune(t, usageHour(100), 4)
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"})
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c"})
		// A pruned key starts again from zero.
		mustAddUsage(t, s, usage("c", "openai", "gpt-4o", usageHour(3), 1))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c"},
			usage("c", "openai", "gpt-4o", usageHour(3), 1))
	})

	t.Run("usage closed", func(t *testing.T) {
		s := fresh(t)
		mustAddUsage(t, s, usage("c", "openai", "gpt-4o", usageHour(0), 1))
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		tests := []struct {
			name string
			call func() error
		}{
			{"AddUsage", func() error { return s.AddUsage(ctx, []store.Usage{usage("c", "openai", "gpt-4o", usageHour(0), 1)}) }},
			{"AddUsage of nothing", func() error { return s.AddUsage(ctx, nil) }},
			{"ListUsage", func() error {
				_, err := s.ListUsage(ctx, store.UsageQuery{Workspace: "w", Project: "p"})
				return err
			}},
			{"PruneUsage", func() error { _, err := s.PruneUsage(ctx, usageHour(1)); return err }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, store.ErrClosed) {
					t.Fatalf("err = %v, want ErrClosed", err)
				}
			})
		}
	})

	t.Run("usage cancelled context", func(t *testing.T) {
		s := fresh(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.AddUsage(cctx, []store.Usage{usage("c", "openai", "gpt-4o", usageHour(0), 1)}); !errors.Is(err, context.Canceled) {
			t.Fatalf("AddUsage err = %v, want context.Canceled", err)
		}
		if _, err := s.ListUsage(cctx, store.UsageQuery{Workspace: "w", Project: "p"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("ListUsage err = %v, want context.Canceled", err)
		}
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p"})
	})

	t.Run("usage concurrent adders", func(t *testing.T) {
		// Replicas add to the same records at once: no addition is lost.
		s := fresh(t)
		const writers, each = 8, 40
		shared := []store.Usage{
			usage("c", "openai", "gpt-4o", usageHour(0), 1),
			usage("c", "anthropic", "claude", usageHour(0), 1),
			usage("", "openai", "gpt-4o", usageHour(1), 1),
		}
		var wg sync.WaitGroup
		errs := make(chan error, writers*each*2)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					// The shared records in another order each time, one of
					// them twice, and a record of the writer's own.
					batch := make([]store.Usage, 0, len(shared)+2)
					for k := range shared {
						batch = append(batch, shared[(k+w+i)%len(shared)])
					}
					batch = append(batch, shared[0], usage(fmt.Sprint("own", w), "openai", "gpt-4o", usageHour(i%3), 1))
					if err := s.AddUsage(ctx, batch); err != nil {
						errs <- err
					}
					if _, err := s.ListUsage(ctx, store.UsageQuery{Workspace: "w", Project: "p", By: store.UsageByModel}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		const total = writers * each
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", By: store.UsageByModel},
			usage("", "openai", "gpt-4o", usageHour(2), 3*total+total),
			usage("", "anthropic", "claude", usageHour(0), total))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c"},
			usage("c", "anthropic", "claude", usageHour(0), total),
			usage("c", "openai", "gpt-4o", usageHour(0), 2*total))
		expectUsage(t, s, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "own3", By: store.UsageByConversation},
			usage("own3", "", "", usageHour(2), each))
	})

	t.Run("usage persists across reopen", func(t *testing.T) {
		s, reopen := open(t)
		if reopen == nil {
			t.Fatalf("open returned no reopen function")
		}
		batch := []store.Usage{
			usage("c", "openai", "gpt-4o", usageHour(0), 1),
			usage("", "anthropic", "claude", usageHour(1), 2),
		}
		mustAddUsage(t, s, batch...)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := reopen(t)
		expectUsage(t, s2, store.UsageQuery{Workspace: "w", Project: "p"},
			usage("", "anthropic", "claude", usageHour(1), 2),
			usage("c", "openai", "gpt-4o", usageHour(0), 1))
		mustAddUsage(t, s2, batch...)
		expectUsage(t, s2, store.UsageQuery{Workspace: "w", Project: "p", Conversation: "c"},
			usage("c", "openai", "gpt-4o", usageHour(0), 2))
		if n, err := s2.PruneUsage(ctx, usageHour(1)); n != 1 || err != nil {
			t.Fatalf("PruneUsage after reopen = %d, %v; want 1", n, err)
		}
	})
}

// usageHour is the start of the UTC hour i hours after Epoch's.
func usageHour(i int) time.Time {
	return Epoch.Truncate(time.Hour).Add(time.Duration(i) * time.Hour)
}

// usage returns a record of tenant w/p whose counts are n times (1, 7,
// 3, 5, 2): the sum of such records is the record of the sum of their n,
// and a count read into another field shows.
func usage(conv, provider, model string, hour time.Time, n int64) store.Usage {
	return store.Usage{Workspace: "w", Project: "p", Conversation: conv, Provider: provider, Model: model, Hour: hour,
		Requests: n, Input: 7 * n, Output: 3 * n, CacheRead: 5 * n, CacheWrite: 2 * n}
}

// usageIn returns u moved to the tenant ws/proj.
func usageIn(ws, proj string, u store.Usage) store.Usage {
	u.Workspace, u.Project = ws, proj
	return u
}

// usageText renders records one a line: tenant, names, Hour (in RFC 3339,
// which shows an offset other than UTC's) and counts.
func usageText(us []store.Usage) string {
	var sb strings.Builder
	for _, u := range us {
		fmt.Fprintf(&sb, "  %q/%q %q %q %q %s: %d %d %d %d %d\n", u.Workspace, u.Project, u.Conversation, u.Provider,
			u.Model, u.Hour.Format(time.RFC3339Nano), u.Requests, u.Input, u.Output, u.CacheRead, u.CacheWrite)
	}
	return sb.String()
}

// expectUsage lists what q selects and checks that it is want, in order,
// with every Hour in UTC. It returns the list.
func expectUsage(t *testing.T, s store.Store, q store.UsageQuery, want ...store.Usage) []store.Usage {
	t.Helper()
	got := mustListUsage(t, s, q)
	if got == nil {
		t.Fatalf("ListUsage(%+v) = nil, want an empty list", q)
	}
	for _, u := range got {
		if u.Hour.Location() != time.UTC {
			t.Fatalf("ListUsage(%+v): Hour %v is not in UTC", q, u.Hour)
		}
	}
	if g, w := usageText(got), usageText(want); g != w {
		t.Fatalf("ListUsage(%+v):\n got\n%s want\n%s", q, g, w)
	}
	return got
}

func mustAddUsage(t *testing.T, s store.Store, batch ...store.Usage) {
	t.Helper()
	if err := s.AddUsage(context.Background(), batch); err != nil {
		t.Fatalf("AddUsage: %v", err)
	}
}

func mustListUsage(t *testing.T, s store.Store, q store.UsageQuery) []store.Usage {
	t.Helper()
	got, err := s.ListUsage(context.Background(), q)
	if err != nil {
		t.Fatalf("ListUsage(%+v): %v", q, err)
	}
	return got
}
