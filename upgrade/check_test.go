package upgrade

import "testing"

func TestVersionRules(t *testing.T) {
	clean := []MemberFacts{{Name: "m1", Checked: true}}
	for _, tc := range []struct {
		from, to string
		verdict  string
		want     string
	}{
		{"3.5.19", "3.6.16", "BLOCKED", IDTooOld},
		{"3.5.21", "3.6.16", "SAFE", IDRollingReplace},
		{"3.5.24", "3.6.16", "SAFE", ""},
		{"3.5.24", "3.7.3", "BLOCKED", IDSkipsMinor},
		{"3.6.5", "3.7.3", "BLOCKED", IDBelowMinimum},
		{"3.6.16", "3.7.3", "SAFE", ""},
		{"3.6.16", "3.5.24", "BLOCKED", IDDowngrade},
		{"3.4.30", "3.5.2", "BLOCKED", IDEarly35},
	} {
		from, _ := ParseVersion(tc.from)
		to, _ := ParseVersion(tc.to)
		rep := Check(from, to, clean)
		found := tc.want == ""
		for _, f := range rep.Findings {
			if f.ID == tc.want {
				found = true
			}
		}
		if rep.Verdict != tc.verdict || !found || len(rep.Path) == 0 {
			t.Errorf("%s -> %s: %s, findings %+v, path %v", tc.from, tc.to, rep.Verdict, rep.Findings, rep.Path)
		}
	}
}

func TestAuthBlocksARollingUpgradeFrom34(t *testing.T) {
	from, _ := ParseVersion("v3.4.30")
	to, _ := ParseVersion("v3.5.24")
	rep := Check(from, to, []MemberFacts{{Name: "m1", Checked: true, AuthEnabled: true}})
	if rep.Verdict != "BLOCKED" || rep.Findings[0].ID != IDAuthRolling34 {
		t.Fatalf("%+v", rep.Findings)
	}
}
