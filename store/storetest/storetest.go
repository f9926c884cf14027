// Package storetest is the conformance suite of [store.Store]: the tests
// every backend passes, so that bbolt and PostgreSQL answer every call
// alike. A backend's own tests call [Run] with an [Opener] of fresh stores
// (store/bolt: a file in t.TempDir(); store/postgres: a fresh schema, when
// SCARPROXY_TEST_POSTGRES_DSN is set).
//
// The suite is split by what it checks: incidents.go, solutions.go (and
// the change feed), fixes.go, records.go (required fields, any text, not
// found), retention.go, versions.go, lifecycle.go (Close, cancelled
// contexts, reopening, concurrent writers), batches.go (AddIncidents),
// dashboard.go (groups and searches), usage.go (token usage: adding up,
// reading, grouping, pruning), tenants.go (ListTenants) and embeddings.go
// (SetSolutionEmbedding). bench.go
// holds the list benchmarks both backends run.
//
// # Imports
//
// Only tests import this package. It imports store and the standard
// library, and must not import a backend (bbolt, pgx) nor any other
// scarproxy package.
package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// Opener opens a fresh, empty store for t, closed when t ends, whose
// clock is TickClock(ClockEpoch, time.Millisecond). It also returns a
// function that opens the same data again (bbolt: the same file;
// PostgreSQL: the same schema, a new pool), with a clock of its own.
type Opener func(t *testing.T) (s store.Store, reopen func(t *testing.T) store.Store)

// Run runs the conformance suite against the stores open opens.
func Run(t *testing.T, open Opener) {
	fresh := func(t *testing.T) store.Store {
		s, _ := open(t)
		return s
	}
	testIncidents(t, fresh)
	testSolutions(t, fresh)
	testFixes(t, fresh)
	testMarks(t, fresh)
	testConversations(t, fresh)
	testRecords(t, fresh)
	testRetention(t, fresh)
	testVersions(t, fresh)
	testLifecycle(t, open)
	testIncidentBatches(t, fresh)
	testBatchSessions(t, open)
	testDashboard(t, fresh)
	testUsage(t, open)
	testTenants(t, fresh)
	testEmbeddings(t, open)
}

// TickClock returns a clock that starts at start and advances by step on
// every call: each stored record gets a distinct, increasing time.
func TickClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	next := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := next
		next = next.Add(step)
		return t
	}
}

// Epoch is the base of the times tests give incidents; fixed so
// failures reproduce. ClockEpoch, a day later, is where every store's
// clock starts (TickClock(ClockEpoch, time.Millisecond)), so records timed
// by the store are newer than the ones a test times itself.
var (
	Epoch      = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)
	ClockEpoch = Epoch.Add(24 * time.Hour)
)

// The helpers below fail t at the first error.

func mustAdd(t *testing.T, s store.Store, inc *store.Incident) {
	t.Helper()
	if err := s.AddIncident(context.Background(), inc); err != nil {
		t.Fatalf("AddIncident: %v", err)
	}
}

func mustPut(t *testing.T, s store.Store, sol *store.Solution) {
	t.Helper()
	if err := s.PutSolution(context.Background(), sol); err != nil {
		t.Fatalf("PutSolution: %v", err)
	}
}

func mustList(t *testing.T, s store.Store, q store.IncidentQuery) []store.Incident {
	t.Helper()
	got, err := s.ListIncidents(context.Background(), q)
	if err != nil {
		t.Fatalf("ListIncidents(%+v): %v", q, err)
	}
	return got
}

// addN stores n incidents of one tenant at start, start+1m, ...; their
// Message is their index.
func addN(t *testing.T, s store.Store, ws, proj, session string, n int, start time.Time) {
	t.Helper()
	for i := range n {
		mustAdd(t, s, &store.Incident{Time: start.Add(time.Duration(i) * time.Minute), Workspace: ws, Project: proj,
			Session: session, Type: store.TypeHTTPError, StatusCode: 429, Message: fmt.Sprint(i)})
	}
}

// Messages joins the incidents' messages with commas.
func Messages(incs []store.Incident) string {
	m := make([]string, len(incs))
	for i, inc := range incs {
		m[i] = inc.Message
	}
	return strings.Join(m, ",")
}
