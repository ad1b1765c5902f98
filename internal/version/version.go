// Package version is the version of the telesched binaries.
package version

import "runtime/debug"

// Version is set at build time by the Makefile:
// -ldflags "-X github.com/telesched/telesched/internal/version.Version=v0.1.0".
var Version = ""

// Get returns Version, else the main module's version from the build info
// (set by `go install module@version`), else "dev".
func Get() string {
	if Version != "" {
		return Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
