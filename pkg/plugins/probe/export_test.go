package probe

// NodeRecordBudget is maxNodeRecords, for the tests of the cache's bound.
const NodeRecordBudget = maxNodeRecords

// NodeRecords counts the node records the cache holds.
func (p *Prober) NodeRecords() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records
}
