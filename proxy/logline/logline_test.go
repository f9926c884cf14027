package logline

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// accessLine is the shape of the line every request logs.
func accessLine(model string, ms float64) []slog.Attr {
	return []slog.Attr{
		slog.String("workspace", "default"), slog.String("project", ""),
		slog.String("conversation", "3f9a0c1d2e4b5a69"), slog.String("api", "responses"),
		slog.String("provider", "openai"), slog.String("model", model),
		slog.Int("status", 200), slog.Float64("duration_ms", ms),
		slog.Int("bytes_in", 21261), slog.Int64("bytes_out", 1830),
		slog.Int("guard", 3), slog.Int("recall", 0), slog.String("loop", "stop"),
		slog.Bool("degraded", true), slog.String("request_id", "01JD5Q7X2M0000000000000000"),
	}
}

// both writes the record through WriteLine and through the slog handler
// alone, and returns the two outputs and what WriteLine reported.
func both(t testing.TB, json bool, tm time.Time, level slog.Level, msg string, attrs []slog.Attr) (fast, slow []byte, ok bool) {
	t.Helper()
	var fb, sb bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	ok = New(&fb, json, opts).WriteLine(tm, level, msg, attrs)
	r := slog.NewRecord(tm, level, msg, 0)
	r.AddAttrs(attrs...)
	if err := New(&sb, json, opts).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return fb.Bytes(), sb.Bytes(), ok
}

func TestWriteLineIsSlogsLine(t *testing.T) {
	tm := time.Date(2026, 11, 28, 4, 5, 6, 7_000_000, time.UTC)
	cases := []struct {
		name  string
		tm    time.Time
		msg   string
		attrs []slog.Attr
	}{
		{"access line", tm, "request", accessLine("gpt-5-codex", 1.25)},
		{"whole milliseconds", tm.Truncate(time.Second), "request", accessLine("m", 3)},
		{"a zone east", tm.In(time.FixedZone("x", 5*3600+1800)), "request", accessLine("m", 0.001)},
		{"nanoseconds", tm.Add(123456789), "request", accessLine("claude-sonnet-4-5-20250929", 12345.678)},
		{"empty message", tm, "", nil},
		{"unsigned and negative", tm, "x", []slog.Attr{slog.Uint64("u", math.MaxUint64), slog.Int("n", -7), slog.Float64("f", -0.5), slog.Float64("z", 0)}},
	}
	for _, c := range cases {
		for _, json := range []bool{false, true} {
			fast, slow, ok := both(t, json, c.tm, slog.LevelInfo, c.msg, c.attrs)
			if !ok {
				t.Errorf("%s (json %v): not written", c.name, json)
				continue
			}
			if !bytes.Equal(fast, slow) {
				t.Errorf("%s (json %v):\n got %s\nwant %s", c.name, json, fast, slow)
			}
		}
	}
}

func TestWriteLineLeavesTheRestToSlog(t *testing.T) {
	tm := time.Date(2026, 11, 28, 4, 5, 6, 0, time.UTC)
	for _, c := range []struct {
		name  string
		tm    time.Time
		msg   string
		attrs []slog.Attr
	}{
		{"a space", tm, "request", []slog.Attr{slog.String("model", "my model")}},
		{"a quote", tm, "request", []slog.Attr{slog.String("model", `a"b`)}},
		{"an equals sign", tm, "request", []slog.Attr{slog.String("model", "a=b")}},
		{"a backslash", tm, "request", []slog.Attr{slog.String("model", `a\b`)}},
		{"a newline", tm, "request", []slog.Attr{slog.String("model", "a\nb")}},
		{"not ASCII", tm, "request", []slog.Attr{slog.String("workspace", "équipe")}},
		{"a key with a space", tm, "request", []slog.Attr{slog.Int("a b", 1)}},
		{"an empty key", tm, "request", []slog.Attr{slog.Int("", 1)}},
		{"a message with a space", tm, "a request", nil},
		{"NaN", tm, "request", []slog.Attr{slog.Float64("f", math.NaN())}},
		{"a duration", tm, "request", []slog.Attr{slog.Duration("d", time.Second)}},
		{"a group", tm, "request", []slog.Attr{slog.Group("g", "a", 1)}},
		{"no time", time.Time{}, "request", nil},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "request", nil},
	} {
		for _, json := range []bool{false, true} {
			fast, _, ok := both(t, json, c.tm, slog.LevelInfo, c.msg, c.attrs)
			if ok || len(fast) > 0 {
				t.Errorf("%s (json %v): written %q; want it left to slog", c.name, json, fast)
			}
		}
	}
}

func TestWriteLineFloatsAsJSONDoes(t *testing.T) {
	tm := time.Date(2026, 11, 28, 4, 5, 6, 0, time.UTC)
	for _, f := range []float64{1e-9, -2e21, 1e21} {
		attrs := []slog.Attr{slog.Float64("f", f)}
		// The text handler writes strconv's 'g' form, which WriteLine
		// writes too; the JSON handler encoding/json's 'e' form, which
		// WriteLine leaves to it.
		if fast, slow, ok := both(t, false, tm, slog.LevelInfo, "request", attrs); !ok || !bytes.Equal(fast, slow) {
			t.Errorf("text, %g: got %q (%v), want %q", f, fast, ok, slow)
		}
		if fast, _, ok := both(t, true, tm, slog.LevelInfo, "request", attrs); ok || len(fast) > 0 {
			t.Errorf("json, %g: written %q; want it left to slog", f, fast)
		}
	}
}

func TestWriteLineLevels(t *testing.T) {
	var b bytes.Buffer
	h := New(&b, false, &slog.HandlerOptions{Level: slog.LevelWarn})
	if !h.WriteLine(time.Now(), slog.LevelInfo, "request", nil) || b.Len() != 0 {
		t.Errorf("below the level: %q written", b.String())
	}
	if !h.WriteLine(time.Now(), slog.LevelError+2, "request", nil) || !bytes.Contains(b.Bytes(), []byte(" level=ERROR+2 ")) {
		t.Errorf("above the level: %q", b.String())
	}
	b.Reset()
	h = New(&b, false, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return a }})
	if h.WriteLine(time.Now(), slog.LevelInfo, "request", nil) || b.Len() != 0 {
		t.Errorf("with ReplaceAttr: %q written; want it left to slog", b.String())
	}
	if _, ok := h.WithAttrs([]slog.Attr{slog.Int("a", 1)}).(*Handler); ok {
		t.Error("a derived handler writes lines without its attrs")
	}
}

// FuzzWriteLine: whatever WriteLine writes is what slog writes.
func FuzzWriteLine(f *testing.F) {
	f.Add("request", "model", "gpt-5", int64(200), 1.5, true, int64(0), false)
	f.Add("", "k", "", int64(-1), -0.0, false, int64(1e15), true)
	f.Add("m", "a=b", "x y", int64(0), 1e-7, true, int64(math.MinInt64), false)
	f.Fuzz(func(t *testing.T, msg, key, s string, n int64, fl float64, bo bool, ns int64, json bool) {
		tm := time.Unix(0, ns).UTC()
		attrs := []slog.Attr{slog.String(key, s), slog.Int64("n", n), slog.Float64("f", fl), slog.Bool("b", bo), slog.String("s", s)}
		fast, slow, ok := both(t, json, tm, slog.LevelInfo, msg, attrs)
		if ok && !bytes.Equal(fast, slow) {
			t.Fatalf("got %s\nwant %s", fast, slow)
		}
		if !ok && len(fast) > 0 {
			t.Fatalf("not written, and yet %q", fast)
		}
	})
}

func BenchmarkAccessLine(b *testing.B) {
	attrs := accessLine("gpt-5-codex", 1.25)
	for _, json := range []bool{false, true} {
		name := map[bool]string{false: "text", true: "json"}[json]
		h := New(io.Discard, json, nil)
		b.Run(name+"/slog", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
				r.AddAttrs(attrs...)
				_ = h.Handle(context.Background(), r)
			}
		})
		b.Run(name+"/WriteLine", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.WriteLine(time.Now(), slog.LevelInfo, "request", attrs)
			}
		})
	}
}

// TestWriteLineBesideSlog: lines written by WriteLine and by the slog
// handler (and a handler derived from it) at once go to a writer that is
// not safe for concurrent use one whole line at a time.
func TestWriteLineBesideSlog(t *testing.T) {
	var b bytes.Buffer
	h := New(&b, false, nil)
	derived := h.WithAttrs([]slog.Attr{slog.String("via", "derived")})
	attrs := accessLine("gpt-5-codex", 1.25)
	var wg sync.WaitGroup
	const each = 200
	for range 2 {
		wg.Go(func() {
			for range each {
				h.WriteLine(time.Now(), slog.LevelInfo, "request", attrs)
			}
		})
		wg.Go(func() {
			for range each {
				r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
				r.AddAttrs(attrs...)
				_ = h.Handle(context.Background(), r)
				_ = derived.Handle(context.Background(), r)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2*each*3 {
		t.Fatalf("%d lines, want %d", len(lines), 2*each*3)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") || strings.Count(l, "time=") != 1 || !strings.Contains(l, " request_id=") {
			t.Fatalf("a line mixed with another: %q", l)
		}
	}
}
