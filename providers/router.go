package providers

import (
	"fmt"
)

// Router picks the providers for a model: the one whose Models patterns
// match (first in configuration order), else the default, followed by its
// fallbacks.
type Router struct {
	all    []*Provider
	byName map[string]*Provider
	def    *Provider
}

// NewRouter builds providers from configs (in order) and checks that every
// fallback names a provider. getenv reads API key variables.
func NewRouter(configs []Config, getenv func(string) string) (*Router, error) {
	r := &Router{byName: make(map[string]*Provider, len(configs))}
	for i, c := range configs {
		if err := c.Validate(fmt.Sprintf("providers[%d]", i)); err != nil {
			return nil, err
		}
		if _, dup := r.byName[c.Name]; dup {
			return nil, fmt.Errorf("providers[%d].name: %q is used twice", i, c.Name)
		}
		p, err := New(c, getenv)
		if err != nil {
			return nil, err
		}
		r.all = append(r.all, p)
		r.byName[c.Name] = p
		if c.Default {
			if r.def != nil {
				return nil, fmt.Errorf("providers[%d].default: %q and %q are both default", i, r.def.Name(), c.Name)
			}
			r.def = p
		}
	}
	if len(r.all) == 0 {
		return nil, fmt.Errorf("providers: at least one provider is required (or use --mock)")
	}
	if r.def == nil {
		r.def = r.all[0]
	}
	for i, c := range configs {
		for j, fb := range c.Fallbacks {
			if _, ok := r.byName[fb]; !ok {
				return nil, fmt.Errorf("providers[%d].fallbacks[%d]: no provider named %q", i, j, fb)
			}
			if fb == c.Name {
				return nil, fmt.Errorf("providers[%d].fallbacks[%d]: %q falls back to itself", i, j, fb)
			}
		}
	}
	return r, nil
}

// Providers returns every provider in configuration order.
func (r *Router) Providers() []*Provider { return r.all }

// Default returns the default provider.
func (r *Router) Default() *Provider { return r.def }

// Route returns the provider for model followed by its fallbacks, without
// repeats. The slice is never empty.
func (r *Router) Route(model string) []*Provider {
	primary := r.def
	for _, p := range r.all {
		if p.Serves(model) {
			primary = p
			break
		}
	}
	if len(primary.cfg.Fallbacks) == 0 {
		return []*Provider{primary}
	}
	chain := make([]*Provider, 0, 1+len(primary.cfg.Fallbacks))
	chain = append(chain, primary)
	for _, name := range primary.cfg.Fallbacks {
		p := r.byName[name]
		dup := false
		for _, q := range chain {
			dup = dup || q == p
		}
		if !dup {
			chain = append(chain, p)
		}
	}
	return chain
}

// CloseIdleConnections closes idle connections of every provider.
func (r *Router) CloseIdleConnections() {
	for _, p := range r.all {
		p.CloseIdleConnections()
	}
}
