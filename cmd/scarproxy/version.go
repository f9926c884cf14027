package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version and revision override the version and VCS revision the build
// recorded, when set at build time with -ldflags "-X main.version=..."
// "-X main.revision=...": for builds that cannot stamp the revision
// themselves (go build does not from a git worktree, nor with
// -buildvcs=false).
var version, revision string

// buildInfo is what the binary says about its build; nil when it recorded
// nothing (a test binary, a build without module support).
var buildInfo = func() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}()

// moduleVersion returns the version the binary was built as: -ldflags
// "-X main.version=V" if given, else the module version the build
// recorded (v1.2.3 after go install ...@v1.2.3; a pseudo-version such as
// v0.0.0-20261126101500-0123456789ab+dirty when built from a clone with
// VCS stamping), else "dev".
func moduleVersion(bi *debug.BuildInfo) string {
	if version != "" {
		return version
	}
	if bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionLine is what `scarproxy version` prints: the version, then the
// VCS revision and commit time when the build recorded them (builds from
// a clone; not go install ...@version) and the Go version, e.g.
//
//	scarproxy v1.2.0 (revision 0123456789ab, 2026-11-26T10:15:00Z, go1.26.8)
//	scarproxy dev (revision 0123456789ab-dirty, 2026-11-26T10:15:00Z, go1.26.8)
func versionLine(bi *debug.BuildInfo) string {
	var rev, at string
	dirty := false
	goVersion := runtime.Version()
	if bi != nil {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value[:min(len(s.Value), 12)]
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if dirty && rev != "" {
		rev += "-dirty"
	}
	if revision != "" {
		rev = revision
	}
	var details []string
	if rev != "" {
		details = append(details, "revision "+rev)
	}
	if at != "" {
		details = append(details, at)
	}
	details = append(details, goVersion)
	return "scarproxy " + moduleVersion(bi) + " (" + strings.Join(details, ", ") + ")"
}
