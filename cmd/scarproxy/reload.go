package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"sync"
	"syscall"

	"github.com/scarproxy/scarproxy/proxy"
	"github.com/scarproxy/scarproxy/store"
)

// reloadable names the top-level configuration keys a running serve takes
// anew on SIGHUP (proxy.Server.Reload). Every other key needs a restart.
var reloadable = map[string]bool{
	"providers": true, "mock": true, "gateway": true, "tenant": true, "guard": true, "recall": true,
}

// reloader reloads serve's configuration: the same file, variables and
// flags as at start-up, applied whole or not at all.
type reloader struct {
	load   func() (Config, error) // Default, the file, SCARPROXY_* variables, flags
	getenv func(string) string
	srv    *proxy.Server
	st     store.Store
	log    *slog.Logger
	// started is the configuration serve started with: a key that needs
	// a restart keeps its value from it until then.
	started Config

	mu sync.Mutex // one reload at a time
}

// Reload loads the configuration again and gives the running server its
// providers, gateway keys, tenant defaults, guard and recall. A
// configuration that does not load, validate or build is refused whole,
// with an ERROR line saying why, and the running one stays. A change to
// a key that needs a restart (the listen address, the store...) is left
// for the restart, with a WARN line naming it.
func (r *reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := r.build()
	if err != nil {
		r.log.Error("configuration reload refused; the running configuration stays", "err", err)
		return err
	}
	if keys := restartKeys(r.started, cfg); len(keys) > 0 {
		r.log.Warn("configuration reloaded, but these settings take effect only after a restart", "keys", strings.Join(keys, ", "))
	}
	r.log.Info("configuration reloaded", "providers", len(cfg.providerConfigs()), "gateway_keys", len(cfg.Gateway.Keys))
	warnExposure(r.started, r.log.With("after", "reload"))
	return nil
}

// build loads, checks and applies the configuration.
func (r *reloader) build() (Config, error) {
	cfg, err := r.load()
	if err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	opts, err := serverOptions(cfg, r.st, r.getenv, r.log)
	if err != nil {
		return cfg, err
	}
	if err := r.srv.Reload(opts); err != nil {
		return cfg, err
	}
	// What the exposure warning reads: the keys as reloaded, the rest as
	// started.
	r.started.Gateway = cfg.Gateway
	return cfg, nil
}

// restartKeys returns the top-level keys whose value differs between the
// running configuration and a reloaded one and that only a restart
// applies.
func restartKeys(running, next Config) []string {
	var keys []string
	a, b := reflect.ValueOf(running), reflect.ValueOf(next)
	for i := range a.NumField() {
		key, _, _ := strings.Cut(a.Type().Field(i).Tag.Get("yaml"), ",")
		if reloadable[key] || reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			continue
		}
		keys = append(keys, key)
	}
	return keys
}

// reloadOnHangup reloads the configuration each time the process gets
// SIGHUP, until ctx ends.
func reloadOnHangup(ctx context.Context, r *reloader) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.log.Info("SIGHUP: reloading the configuration")
				_ = r.Reload() // logged
			}
		}
	}()
}
