// Package provisioning holds the rules by which Phalanx asks a cluster
// autoscaler for the nodes of a whole gang: which gangs qualify, the pod
// templates and counts of the ProvisioningRequest made for one, how the
// autoscaler's answer is read, and the backoff between attempts. It reads
// Kubernetes objects but does no API calls; phalanx-controller
// (pkg/controller, provisioning.go) applies these rules to the cluster.
package provisioning
