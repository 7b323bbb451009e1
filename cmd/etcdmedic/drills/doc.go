// Package drills is the end-to-end test of etcdmedic drill: every incident drill, run as the
// README's first command runs it. It is a test binary of its own so that go test -p 2 runs it
// beside cmd/etcdmedic's tests from the start: it is the longest test of the run, and inside
// cmd/etcdmedic go test started it whenever it chose, once as late as 400 s into the run.
package drills
