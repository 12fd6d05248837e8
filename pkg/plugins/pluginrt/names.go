package pluginrt

// The names of Phalanx's plugins in a KubeSchedulerConfiguration. They live
// here, not in each plugin's package, so plugins can recognise each other's
// statuses without importing one another.
const (
	QueueSortName  = "PhalanxQueueSort"
	GangName       = "PhalanxGang"
	TopologyName   = "PhalanxTopology"
	PreemptionName = "PhalanxPreemption"
	// DynamicResourcesName is upstream's DynamicResources plugin with the
	// claims of scheduling.k8s.io PodGroups reserved for the PodGroup
	// (pkg/plugins/dra): a profile runs it instead of DynamicResources.
	DynamicResourcesName = "PhalanxDynamicResources"
	// InterPodAffinityName is upstream's InterPodAffinity plugin whose
	// PreFilter skips the cluster-wide precomputation for pods with only
	// hostname anti-affinity (pkg/plugins/podaffinity): the shipped
	// profiles run it instead of InterPodAffinity.
	InterPodAffinityName = "PhalanxInterPodAffinity"
)
