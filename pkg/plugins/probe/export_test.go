package probe

// NodeRecordBudget is maxNodeRecords, for the tests of the cache's bound.
const NodeRecordBudget = maxNodeRecords

// NodeRecords counts the node records the cache holds.
func (p *Prober) NodeRecords() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records
}

// FilterNodeByNode makes the prober run the profile's filters on every
// node even where its affinity index could answer: the tests of the
// verdict cache count filter calls, and the index's tests compare its
// answers with the filters'.
func (p *Prober) FilterNodeByNode() { p.noIndex = true }
