package v1alpha1

// The batch/v1 Job integration, as both binaries see it. phalanx-controller
// makes a Job annotated GangAnnotation "true" into a Workload with one
// template, JobTemplateName, and attaches the Job's pods to its PodGroup;
// phalanx-scheduler holds such a Job's pods until then, and names the
// controller in their messages. They live here so that the scheduler does
// not depend on the controller's package.
const (
	// ControllerName is phalanx-controller's event source and the field
	// manager of its writes.
	ControllerName = "phalanx-controller"
	// GangAnnotation opts a batch/v1 Job in: "true" makes its pods one gang.
	GangAnnotation = "scheduling.phalanx.dev/gang"
	// JobTemplateName is the name of the one podGroupTemplate of a Job's
	// Workload, so a Job's PodGroup is named <job>-workers.
	JobTemplateName = "workers"
)
