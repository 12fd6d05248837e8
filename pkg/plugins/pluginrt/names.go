package pluginrt

// The names of Phalanx's plugins in a KubeSchedulerConfiguration. They live
// here, not in each plugin's package, so plugins can recognise each other's
// statuses without importing one another.
const (
	QueueSortName  = "PhalanxQueueSort"
	GangName       = "PhalanxGang"
	TopologyName   = "PhalanxTopology"
	PreemptionName = "PhalanxPreemption"
)
