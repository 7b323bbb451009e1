package upgrade

import (
	"encoding/json"
	"testing"

	"github.com/etcdmedic/etcdmedic/plan"
)

// A plan written before steps had kinds (IDs only) is applied as the same plan: each step's
// kind, member and hop are read from its ID.
func TestStepsOfOlderPlansGetTheirKinds(t *testing.T) {
	var steps []plan.Step
	old := `[{"id":"snapshot","title":"s"},{"id":"downgrade-enable","title":"d"},{"id":"hop1:m2","title":"h"},{"id":"check1","title":"c"}]`
	if err := json.Unmarshal([]byte(old), &steps); err != nil {
		t.Fatal(err)
	}
	want := []plan.Step{plan.NewStep(StepSnapshot, "", "s"), plan.NewStep(StepDowngradeEnable, "", "d"), hopStep(1, "m2", "h"), checkStep(1, "c")}
	for i, s := range steps {
		if got := typed(s); got != want[i] {
			t.Errorf("step %s read as %+v, want %+v", s.ID, got, want[i])
		}
	}
}
