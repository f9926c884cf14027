package memory

import (
	"maps"
	"sync"
	"time"
)

// recoveries says, per tenant, when each provider last answered well
// after failing; gen changes with every mark, so guards derived before
// it are not reused. Generations are never reused, not even after the
// map is cleared.
type recoveries struct {
	mu   sync.Mutex
	m    map[tenantKey]recovery
	last int64 // the last generation given
}

type recovery struct {
	gen int64
	at  map[string]time.Time // provider -> time; never modified once shared (copy on write)
}

func newRecoveries() *recoveries { return &recoveries{m: make(map[tenantKey]recovery)} }

// of returns the tenant's generation and recoveries (read only).
func (r *recoveries) of(k tenantKey) (int64, map[string]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc := r.m[k]
	return rc.gen, rc.at
}

// mark notes that provider answered well at now.
func (r *recoveries) mark(k tenantKey, provider string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= 1<<14 {
		clear(r.m) // bounded; a forgotten recovery only leaves an entry in the guard
	}
	rc := r.m[k]
	at := make(map[string]time.Time, len(rc.at)+1)
	maps.Copy(at, rc.at)
	at[provider] = now
	r.last++
	r.m[k] = recovery{gen: r.last, at: at}
}

// ProviderAnswered notes a good answer to the request of turn t of a provider: its failures in the
// tenant's window that came before it leave the guard (they are retired
// on this replica; other replicas retire them on their own good answers).
// It costs a map lookup unless the provider has failed since it last
// answered well.
func (m *Memory) ProviderAnswered(t *Turn, provider string) {
	if t.window == nil {
		return
	}
	failed, ok := t.window.lastFailure(provider)
	if !ok {
		return
	}
	k := tenantKey{t.window.workspace, t.window.project}
	if _, at := m.recovered.of(k); !at[provider].Before(failed) {
		return
	}
	m.recovered.mark(k, provider, m.opts.Now())
}
