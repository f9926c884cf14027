package providers

import (
	"fmt"
	"slices"
)

// Router picks the providers for a request of one API and one model: among
// the providers that serve the API, the one whose Models patterns match
// (first in configuration order), else the default, followed by its
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

// Route returns the providers for a request of api (one of the API*
// constants) naming model, in the order to try them:
//
//  1. among the providers that serve api, the first whose Models patterns
//     match model; else the default provider if it serves api; else the
//     first provider that serves api;
//  2. then that provider's fallbacks that serve api, in order, without
//     repeats.
//
// Route returns nil when no provider serves api: the caller answers the
// client itself.
func (r *Router) Route(api, model string) []*Provider {
	var primary *Provider
	for _, p := range r.all {
		if p.ServesAPI(api) && p.Serves(model) {
			primary = p
			break
		}
	}
	if primary == nil && r.def.ServesAPI(api) {
		primary = r.def
	}
	if primary == nil {
		for _, p := range r.all {
			if p.ServesAPI(api) {
				primary = p
				break
			}
		}
	}
	if primary == nil {
		return nil
	}
	if len(primary.cfg.Fallbacks) == 0 {
		return []*Provider{primary}
	}
	chain := make([]*Provider, 0, 1+len(primary.cfg.Fallbacks))
	chain = append(chain, primary)
	for _, name := range primary.cfg.Fallbacks {
		p := r.byName[name]
		if p.ServesAPI(api) && !slices.Contains(chain, p) {
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
