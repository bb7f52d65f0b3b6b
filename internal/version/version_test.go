package version

import "testing"

func TestOnlyAReleaseModuleVersionNamesTheBuild(t *testing.T) {
	for v, release := range map[string]bool{
		"v0.2.0":                               true,
		"v1.0.0-rc.1":                          true,
		"(devel)":                              false,
		"":                                     false,
		"v0.0.0-20261202073948-5384f57ab0c1":   false,
		"v0.1.1-0.20261202073948-5384f57ab0c1": false,
		"v0.2.0+dirty":                         false,
	} {
		got := releaseVersion.MatchString(v) && !pseudoVersion.MatchString(v)
		if got != release {
			t.Errorf("%q: release version %v, want %v", v, got, release)
		}
	}
	if Version != Release {
		t.Errorf("a test binary is version %s, want the tree's %s", Version, Release)
	}
}
