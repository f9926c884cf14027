package wire

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// agentStart is the start of an agent's request that every run sends:
// the model, then developer elements (instructions, tools) of about
// 6 KB, before the array's first user element.
var agentStart = `{"model":"m","input":[{"role":"developer","content":"` + strings.Repeat("Follow the rules. ", 300) +
	`"},{"type":"additional_tools","role":"developer","tools":[{"name":"exec","schema":{"type":"object","n":[1,2.5e3,true,null]}}]}`

// agentBody is a request of run, its task and the steps of the run after
// agentStart.
func agentBody(run, steps int) []byte {
	b := agentStart + fmt.Sprintf(`,{"role":"user","content":"task of run %d"}`, run)
	for i := range steps {
		b += fmt.Sprintf(`,{"type":"function_call","call_id":"r%d_%d"}`, run, i)
	}
	return []byte(b + `],"store":false}`)
}

// scanWith scans body as Responses does, with m's memo (nil: none).
func scanWith(m *TurnMemo[string], tenant string, body []byte) (TurnScan, error) {
	r := NewResume(m)
	return ScanTurn(body, []string{"model", "input", "store"}, 1, &r, tenant, func(string) []Span { return nil })
}

// TestKnownStartIsNotScannedAgain: a start of at least knownMin bytes
// offered twice is kept; a body that begins with it is not checked again
// there, and its scan finds what a full scan finds; another tenant's body,
// or one whose start differs by a byte, is scanned.
func TestKnownStartIsNotScannedAgain(t *testing.T) {
	m := NewTurnMemo[string](0)
	for run := range 2 {
		if _, err := scanWith(m, "t", agentBody(run, 1)); err != nil {
			t.Fatal(err)
		}
	}
	list := m.starts.list.Load()
	if list == nil || len(*list) != 1 || string((*list)[0].start) != agentStart || (*list)[0].End != len(agentStart) {
		t.Fatal("the start seen twice is not known")
	}
	if m.Bytes() != len(agentStart) {
		t.Fatalf("memo holds %d bytes, want the start's %d", m.Bytes(), len(agentStart))
	}
	for _, tc := range []struct {
		name, tenant string
		body         []byte
		known        bool
	}{
		{"a new run", "t", agentBody(7, 3), true},
		{"another tenant", "u", agentBody(7, 3), false},
		{"a byte of the start changed", "t", []byte(strings.Replace(string(agentBody(7, 3)), "rules.", "rulez.", 1)), false},
		{"a model before the start changed", "t", []byte(strings.Replace(string(agentBody(7, 3)), `"m"`, `"n"`, 1)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, gerr := scanWith(m, tc.tenant, tc.body)
			want, werr := scanWith(nil, tc.tenant, tc.body)
			if got.KnownStart != tc.known {
				t.Fatalf("known start %v, want %v", got.KnownStart, tc.known)
			}
			got.KnownStart = false
			if gerr != nil || werr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("with the memo %+v (%v)\nin full %+v (%v)", got, gerr, want, werr)
			}
		})
	}
}

// TestKnownStartBounds: a start shorter than knownMin, or whose last
// element is not an object, is not kept; the starts kept are bounded in
// number, the newest kept.
func TestKnownStartBounds(t *testing.T) {
	m := NewTurnMemo[string](0)
	short := []byte(`{"input":[{"role":"developer","content":"short"},{"role":"user","content":"g"}]}`)
	number := []byte(`{"input":[{"role":"developer","content":"` + strings.Repeat("x", knownMin) + `"},12,{"role":"user","content":"g"}]}`)
	for range 3 {
		for _, b := range [][]byte{short, number} {
			if _, err := scanWith(m, "t", b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.starts.list.Load() != nil {
		t.Fatal("a short start, or one that ends in a number, was kept")
	}
	for i := range knownMax + 3 {
		b := []byte(strings.Replace(string(agentBody(0, 0)), "Follow", fmt.Sprintf("Agent %02d", i), 1))
		for range 2 {
			if _, err := scanWith(m, "t", b); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := *m.starts.list.Load()
	if len(list) != knownMax || !strings.Contains(string(list[0].start), fmt.Sprintf("Agent %02d", knownMax+2)) {
		t.Fatalf("%d starts kept, the newest %.60q", len(list), list[0].start)
	}
}

// TestKnownStartCopiesArePaidFor: twice as many distinct starts in use
// as the memo keeps, taking turns, push each other out without being
// found; the copies stop once they cost twice the memo's bytes more than
// what was found, where they would go on with every start seen twice.
func TestKnownStartCopiesArePaidFor(t *testing.T) {
	m := NewTurnMemo[string](0)
	body := func(i int) []byte {
		return []byte(strings.Replace(string(agentBody(0, 0)), "Follow", fmt.Sprintf("Agent %02d", i), 1))
	}
	size := len(agentStart)
	copies, attempts, found := 0, 0, 0
	for round := range 400 {
		for i := range 2 * knownMax {
			for range 2 {
				before := m.starts.list.Load()
				ts, err := scanWith(m, "t", body(i))
				if err != nil {
					t.Fatal(err)
				}
				if ts.KnownStart {
					found += size
				} else if round > 0 || i > 0 {
					attempts++
				}
				if m.starts.list.Load() != before {
					copies++
				}
			}
		}
	}
	if limit := (2*knownMaxBytes+found)/(2*size) + 1; copies > limit || attempts/2 <= limit {
		t.Fatalf("%d starts kept of %d seen twice or more, %d bytes found: want at most %d", copies, attempts/2, found, limit)
	}
}

// FuzzKnownStart scans bodies that begin with a known start, with the
// memo and without: the same spans, the same verdict on the JSON.
func FuzzKnownStart(f *testing.F) {
	f.Add(`,{"role":"user","content":"g"}],"store":false}`)
	f.Add(`]}`)
	f.Add(`2,{"role":"user"}]}`)
	f.Add(` , {"role":"user","x":{"y":[1]}} ] , "model":"n"}`)
	f.Add(`,{"role":"user"}],"input":[]}`)
	f.Add(`}`)
	f.Add(``)
	m := NewTurnMemo[string](0)
	for run := range 2 {
		if _, err := scanWith(m, "t", agentBody(run, 0)); err != nil {
			f.Fatal(err)
		}
	}
	if m.starts.list.Load() == nil {
		f.Fatal("the start is not known")
	}
	f.Fuzz(func(t *testing.T, rest string) {
		body := []byte(agentStart + rest)
		got, gerr := scanWith(m, "t", body)
		want, werr := scanWith(nil, "t", body)
		got.KnownStart = false
		if (gerr == nil) != (werr == nil) || gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("with the memo %+v (%v)\nin full %+v (%v)", got, gerr, want, werr)
		}
	})
}
