package etcdtest

import (
	"flag"
	"testing"
)

// What TestMain's BeforeTests starts early is started only when its test will run.
func TestSelectedFollowsRunAndSkip(t *testing.T) {
	for _, tc := range []struct {
		run, skip string
		want      bool
	}{
		{"", "", true},
		{"TestDrillEveryIncident", "", true},
		{"TestDrill", "", true},
		{"TestDrillEveryIncident/quorum", "", true},
		{"TestDoctorTLS", "", false},
		{"", "TestDrillEveryIncident", false},
		{"", "TestDrillEveryIncident/sub", true},
		{"", "TestDoctor", true},
	} {
		setFlag(t, "test.run", tc.run)
		setFlag(t, "test.skip", tc.skip)
		if got := Selected("TestDrillEveryIncident"); got != tc.want {
			t.Errorf("-run %q -skip %q: Selected = %v, want %v", tc.run, tc.skip, got, tc.want)
		}
	}
}

// setFlag sets a test flag for the rest of the test (the testing package read it at start).
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %s", name)
	}
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set(name, old) })
}
