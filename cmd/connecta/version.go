package main

import (
	"runtime"
	"runtime/debug"
)

// Link-time stamps (`make build`: -ldflags "-X main.version=… -X main.commit=…").
var (
	version = ""
	commit  = ""
)

// versionInfo is what `connecta version` prints and /health reports. Sources
// in order: the link-time stamp; else what the Go toolchain recorded (the
// module version and vcs.revision); else "dev" and "unknown commit".
type versionInfo struct {
	Version, Commit, GoVersion string
}

func readVersion() versionInfo {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(version, commit, bi, runtime.Version())
}

// versionFrom applies the fallback order to one set of sources.
func versionFrom(stampVersion, stampCommit string, bi *debug.BuildInfo, goVersion string) versionInfo {
	v := versionInfo{Version: stampVersion, Commit: stampCommit, GoVersion: goVersion}
	if bi != nil {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		if v.Commit == "" {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && s.Value != "" {
					v.Commit = s.Value
				}
			}
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" {
		v.Commit = "unknown commit"
	}
	return v
}

// String is the pinned line: connecta <version> (<commit>, <go version>).
func (v versionInfo) String() string {
	return "connecta " + v.Version + " (" + v.Commit + ", " + v.GoVersion + ")"
}

// buildVersion is the version alone (server info, activity, logs).
func buildVersion() string { return readVersion().Version }
