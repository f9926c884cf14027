package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// openTestBolt opens a bbolt store in a fresh file, closed at the end of
// the test, and registers how to reopen it.
func openTestBolt(t *testing.T) Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "scarproxy.db")
	clock := tickClock(clockEpoch, time.Millisecond)
	open := func(t *testing.T) Store {
		t.Helper()
		b, err := OpenBolt(path, BoltOptions{Now: clock})
		if err != nil {
			t.Fatalf("OpenBolt: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	s := open(t)
	registerReopen(s, open)
	return s
}

func TestBolt(t *testing.T) {
	testStore(t, openTestBolt)
}

func TestOpenBoltLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scarproxy.db")
	first, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := OpenBolt(path, BoltOptions{})
	if err == nil {
		second.Close()
		t.Fatal("second OpenBolt of a file in use succeeded")
	}
	if !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("error %q does not say the file is locked", err)
	}
}

func TestOpenBoltBadPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{"parent is a file", filepath.Join(file, "scarproxy.db")},
		{"not a bbolt file", file},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenBolt(tt.path, BoltOptions{})
			if err == nil {
				s.Close()
				t.Fatal("OpenBolt succeeded")
			}
			if !strings.HasPrefix(err.Error(), "store: open bolt") {
				t.Fatalf("error %q lacks context", err)
			}
		})
	}
}

// TestBoltRetentionIndexOfOldFiles: a file written before solutions had a
// retention index (u) and a count (n) gets both when opened, so pruning
// finds its solutions.
func TestBoltRetentionIndexOfOldFiles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "scarproxy.db")
	b, err := OpenBolt(path, BoltOptions{Now: tickClock(clockEpoch, time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var sols []Solution
	for i, verified := range []bool{false, true, false, false} {
		sol := Solution{Workspace: "w", Key: fmt.Sprint("k", i), Goal: "g", Verified: verified}
		if err := b.PutSolution(ctx, &sol); err != nil {
			t.Fatal(err)
		}
		sols = append(sols, sol)
	}
	// Back to the old layout.
	err = b.db.Update(func(tx *bolt.Tx) error {
		ws := tx.Bucket(bktSolutions).Bucket([]byte("w"))
		if err := ws.DeleteBucket(bktSolByUpd); err != nil {
			return err
		}
		return ws.Delete(keyCount)
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()

	b, err = OpenBolt(path, BoltOptions{Now: tickClock(clockEpoch.Add(time.Hour), time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Age: k0 and k2 are old and unverified; k1 is verified. Then a cap
	// of 1 keeps the verified one.
	n, err := b.PruneSolutions(ctx, sols[3].Updated, 0)
	if err != nil || n != 2 {
		t.Fatalf("PruneSolutions by age = %d, %v; want 2", n, err)
	}
	n, err = b.PruneSolutions(ctx, time.Time{}, 1)
	if err != nil || n != 1 {
		t.Fatalf("PruneSolutions by cap = %d, %v; want 1", n, err)
	}
	list, err := b.ListSolutions(ctx, "w")
	if err != nil || len(list) != 1 || list[0].ID != sols[1].ID {
		t.Fatalf("left %+v, %v; want the verified solution", list, err)
	}
}

func TestNewID(t *testing.T) {
	base := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	ids := make([]string, 0, 1000)
	seen := map[string]bool{}
	for i := range 1000 {
		id := newID(base.Add(time.Duration(i/10) * time.Nanosecond)) // 10 per nanosecond
		if len(id) != 26 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q: want 26 lowercase hex digits", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	for i := 10; i < len(ids); i += 10 {
		if ids[i] <= ids[i-10] {
			t.Fatalf("id %q of a later time sorts before %q", ids[i], ids[i-10])
		}
	}
}

func TestIncidentCodec(t *testing.T) {
	tests := []struct {
		name string
		inc  Incident
	}{
		{"empty", Incident{Time: time.UnixMicro(0).UTC()}},
		{"full", Incident{ID: "0123456789abcdef0123456789", Time: normTime(time.Now()), Workspace: "w",
			Project: "p", Session: "s", Agent: "a", Provider: "openai", Model: "gpt", Type: TypeHTTPError,
			StatusCode: 429, Message: "rate limited\nretry", Fingerprint: "fp"}},
		{"before 1970", Incident{Time: time.Date(1900, 1, 1, 0, 0, 0, 1000, time.UTC), Message: "old"}},
		{"negative status and unicode", Incident{Time: time.UnixMicro(1).UTC(), StatusCode: -1, Message: "é\x00✓"}},
		{"long message", Incident{Time: time.UnixMicro(5).UTC(), Message: strings.Repeat("m", 70000)}},
		{"code", Incident{ID: "id", Time: time.UnixMicro(9).UTC(), Workspace: "w", Project: "p", Type: "network_error",
			Code: "ECONNRESET", Message: "socket hang up"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendIncident(nil, &tt.inc)
			// Records without a code keep the version 1 bytes files
			// written before codes existed hold.
			if want := byte(incidentCodecV1); tt.inc.Code != "" && b[0] != incidentCodecV2 || tt.inc.Code == "" && b[0] != want {
				t.Fatalf("version byte %d for code %q", b[0], tt.inc.Code)
			}
			var got Incident
			if err := decodeIncident(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.inc) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tt.inc)
			}
		})
	}
}

// TestDecodeIncidentVersion1 decodes a record as the first version of the
// codec wrote it, byte for byte.
func TestDecodeIncidentVersion1(t *testing.T) {
	b := []byte{1, 2, 'i', 'd', 1, 'w', 1, 'p', 0, 0, 0, 0, 4, 't', 'y', 'p', 'e', 3, 'm', 's', 'g', 0, 14, 0xa6, 0x07}
	var got Incident
	if err := decodeIncident(b, &got); err != nil {
		t.Fatal(err)
	}
	want := Incident{ID: "id", Workspace: "w", Project: "p", Type: "type", Message: "msg", Time: time.UnixMicro(7).UTC(), StatusCode: 467}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestDecodeIncidentCorrupt(t *testing.T) {
	good := appendIncident(nil, &Incident{ID: "id", Time: time.UnixMicro(7).UTC(), Message: "m"})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{9}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"length past end", []byte{incidentCodecV1, 0x7f}},
		{"huge length", []byte{incidentCodecV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"version 2 without code", append(append([]byte{incidentCodecV2}, good[1:]...), 0)},
		{"version 2 missing code", append([]byte{incidentCodecV2}, good[1:]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var inc Incident
			if err := decodeIncident(tt.b, &inc); err != errCorrupt {
				t.Fatalf("err = %v, want errCorrupt", err)
			}
		})
	}
}

// FuzzDecodeIncident checks that decoding never panics and that whatever
// decodes encodes back to the same bytes.
func FuzzDecodeIncident(f *testing.F) {
	f.Add(appendIncident(nil, &Incident{ID: "id", Time: time.UnixMicro(1).UTC(), Workspace: "w", Project: "p", Message: "m", StatusCode: 500}))
	f.Add([]byte{incidentCodecV1})
	f.Add(appendIncident(nil, &Incident{ID: "id", Time: time.UnixMicro(2).UTC(), Type: "t", Code: "ENOENT", Message: "m"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var inc Incident
		if err := decodeIncident(b, &inc); err != nil {
			return
		}
		if again := appendIncident(nil, &inc); string(again) != string(b) {
			// Varints have one canonical form when written; a non-canonical
			// input may decode, but must then decode to the same record.
			var inc2 Incident
			if err := decodeIncident(again, &inc2); err != nil || !reflect.DeepEqual(inc, inc2) {
				t.Fatalf("re-encoding %x gave %x (%v)", b, again, err)
			}
		}
	})
}

func TestFeedEntry(t *testing.T) {
	tests := []struct {
		name          string
		deleted       bool
		workspace, id string
	}{
		{"live", false, "w", "id1"},
		{"deleted", true, "workspace with spaces", "0123456789abcdef0123456789"},
		{"empty id", false, "w", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, w, id, err := parseFeedEntry(feedEntry(tt.deleted, tt.workspace, tt.id))
			if err != nil || d != tt.deleted || w != tt.workspace || id != tt.id {
				t.Fatalf("got %v %q %q %v", d, w, id, err)
			}
		})
	}
	for _, bad := range [][]byte{nil, {2}, {0, 5, 'a'}} {
		if _, _, _, err := parseFeedEntry(bad); err != errCorrupt {
			t.Fatalf("parseFeedEntry(%x) err = %v, want errCorrupt", bad, err)
		}
	}
}

// TestBoltTimeKeyOrder checks that time keys sort by time, before 1970
// included.
func TestBoltTimeKeyOrder(t *testing.T) {
	times := []time.Time{
		time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 0),
		time.Unix(0, 0),
		time.Unix(0, 1000),
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	keys := make([]string, len(times))
	for i, tm := range times {
		keys[i] = string(timeKey(tm))
	}
	if !sort.StringsAreSorted(keys) {
		t.Fatalf("time keys do not sort by time: %x", keys)
	}
}

// benchDir holds the 1M-incident file, built once per test binary run.
var (
	benchDir  string
	benchOnce sync.Once
	benchPath string
	benchErr  error
)

const (
	benchIncidents = 1_000_000
	benchSessions  = 100
)

// benchNewest is the time of the newest incident of the benchmark tenant;
// incidents are one second apart, older ones back from it.
var benchNewest = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// boltBenchFile builds (once) a bbolt file whose tenant bench/p holds
// benchIncidents incidents, plus a small neighbour tenant.
func boltBenchFile(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "scarproxy-bench-")
		if benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "bench.db")
		s, err := OpenBolt(benchPath, BoltOptions{})
		if err != nil {
			benchErr = err
			return
		}
		defer s.Close()
		s.db.NoSync = true
		const batch = 100_000
		for start := 0; start < benchIncidents; start += batch {
			err := s.db.Update(func(tx *bolt.Tx) error {
				t, err := createTenant(tx, "bench", "p")
				if err != nil {
					return err
				}
				for i := start; i < start+batch; i++ {
					age := benchIncidents - 1 - i
					ts := benchNewest.Add(-time.Duration(age) * time.Second)
					inc := Incident{ID: newID(ts), Time: ts, Workspace: "bench", Project: "p",
						Session: fmt.Sprintf("session-%02d", i%benchSessions), Agent: "agent-1",
						Provider: "openai", Model: "gpt-4o-mini", Type: TypeToolError,
						Message:     "exit status 1: go test ./... failed: undefined: foo (compile error)",
						Fingerprint: "tool:go_test:undefined"}
					if err := t.put(&inc); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				benchErr = err
				return
			}
		}
		for i := range 1000 {
			ctx := context.Background()
			if err := s.AddIncident(ctx, &Incident{Time: benchNewest, Workspace: "bench", Project: "other", Message: fmt.Sprint(i)}); err != nil {
				benchErr = err
				return
			}
		}
		s.db.NoSync = false
	})
	if benchErr != nil {
		b.Fatalf("build benchmark file: %v", benchErr)
	}
	return benchPath
}

// BenchmarkListIncidents lists from a tenant holding 1M incidents (one per
// second; 100 sessions), as the proxy does on every chat completion.
func BenchmarkListIncidents(b *testing.B) {
	path := boltBenchFile(b)
	s, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchmarkList(b, s)
}

// benchmarkList runs the list cases shared by the bbolt and PostgreSQL
// benchmarks against a store seeded like boltBenchFile.
func benchmarkList(b *testing.B, s Store) {
	ctx := context.Background()
	cases := []struct {
		name string
		q    IncidentQuery
		want int
	}{
		{"window=10s/limit=1000", IncidentQuery{Since: benchNewest.Add(-10 * time.Second), Limit: 1000}, 11},
		{"window=1h/limit=1000", IncidentQuery{Since: benchNewest.Add(-time.Hour), Limit: 1000}, 1000},
		{"window=1h/session/limit=1000", IncidentQuery{Since: benchNewest.Add(-time.Hour), Session: "session-07", Limit: 1000}, 36},
		{"window=none/limit=100", IncidentQuery{}, 100},
		{"window=empty", IncidentQuery{Since: benchNewest.Add(time.Second), Limit: 1000}, 0},
	}
	for _, c := range cases {
		c.q.Workspace, c.q.Project = "bench", "p"
		b.Run(c.name, func(b *testing.B) {
			got, err := s.ListIncidents(ctx, c.q)
			if err != nil || len(got) != c.want {
				b.Fatalf("ListIncidents = %d incidents, %v; want %d", len(got), err, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ListIncidents(ctx, c.q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.want), "incidents/op")
		})
	}
}

// BenchmarkIncidentCodec compares decoding the stored form with JSON.
func BenchmarkIncidentCodec(b *testing.B) {
	inc := Incident{ID: newID(benchNewest), Time: benchNewest, Workspace: "bench", Project: "p",
		Session: "session-07", Agent: "agent-1", Provider: "openai", Model: "gpt-4o-mini", Type: TypeToolError,
		Message: "exit status 1: go test ./... failed: undefined: foo (compile error)", Fingerprint: "tool:go_test:undefined"}
	bin := appendIncident(nil, &inc)
	js, err := json.Marshal(&inc)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode=binary", func(b *testing.B) {
		b.ReportAllocs()
		b.ReportMetric(float64(len(bin)), "bytes")
		for b.Loop() {
			var out Incident
			if err := decodeIncident(bin, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode=json", func(b *testing.B) {
		b.ReportAllocs()
		b.ReportMetric(float64(len(js)), "bytes")
		for b.Loop() {
			var out Incident
			if err := json.Unmarshal(js, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
