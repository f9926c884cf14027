package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "scarproxy dev ("},
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}},
			"scarproxy v1.4.0 (go1.26.8)"},
		{"a clone, VCS stamped", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Version: "v0.0.0-20261126101500-0123456789ab"},
			Settings: settings("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-11-26T10:15:00Z", "vcs.modified", "false")},
			"scarproxy v0.0.0-20261126101500-0123456789ab (revision 0123456789ab, 2026-11-26T10:15:00Z, go1.26.8)"},
		{"a dirty tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "0123456789abcdef0123", "vcs.modified", "true")},
			"scarproxy dev (revision 0123456789ab-dirty, go1.26.8)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionLine(tc.bi); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("versionLine = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("ldflags", func(t *testing.T) {
		version = "v9.9.9"
		defer func() { version = "" }()
		if got := versionLine(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}); got != "scarproxy v9.9.9 (go1.26.8)" {
			t.Fatalf("versionLine = %q", got)
		}
	})
}

func TestRevisionFromLdflags(t *testing.T) {
	revision = "0123456789ab-dirty"
	defer func() { revision = "" }()
	if got := versionLine(&debug.BuildInfo{GoVersion: "go1.26.8"}); got != "scarproxy dev (revision 0123456789ab-dirty, go1.26.8)" {
		t.Fatalf("versionLine = %q", got)
	}
}
