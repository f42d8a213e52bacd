package hosts

// Abandon makes the machine behave as if its process had been killed: it stops acting
// (no restarts, no changes) and releases the directory's lock, leaving everything it made
// in place for the next Open or Cleanup.
func (m *Machine) Abandon() {
	m.mu.Lock()
	m.closed = true
	for _, h := range m.hosts {
		if h.timer != nil {
			h.timer.Stop()
		}
	}
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	_ = m.lock.Close()
}
