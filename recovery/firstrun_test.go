package recovery

import "testing"

// Killing a one-member cluster loses nothing acknowledged only where etcd acknowledges a
// write after its WAL holds it (etcd #14370): the first run's quick stop is for those.
func TestTheFirstRunIsKilledOnlyWhereAcknowledgedMeansOnDisk(t *testing.T) {
	for version, quick := range map[string]bool{
		"3.4.20": false, "3.4.21": true, "3.5.0": false, "3.5.4": false, "3.5.5": true, "3.5.24": true,
		"3.6.0-alpha.0": true, "3.6.16": true, "v3.7.3": true, "3.3.27": false, "": false, "not a version": false,
	} {
		if got := durableSingleMemberAcks(version); got != quick {
			t.Errorf("etcd %q: killed after a short grace %v, want %v", version, got, quick)
		}
	}
}
