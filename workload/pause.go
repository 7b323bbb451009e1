package workload

// Pause stops the clients between operations and returns once every operation in flight has
// ended (each is bounded by the request timeout): from then on, every acknowledged operation
// is in the history and no new one starts until Resume. Watchers and lease keep-alives go on.
// A drill pauses the workload when it needs to know that nothing is in flight, for example
// before it cuts the power of a cluster whose disks it will partly lose.
func (w *Workload) Pause() {
	w.gate.Lock()
	w.mu.Lock()
	w.paused = true
	w.mu.Unlock()
}

// Resume lets paused clients go on; it does nothing when the workload is not paused.
func (w *Workload) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.paused {
		w.paused = false
		w.gate.Unlock()
	}
}
