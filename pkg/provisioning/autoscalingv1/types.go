// Package autoscalingv1 is a copy of the schema of the cluster autoscaler's
// ProvisioningRequest API (autoscaling.x-k8s.io/v1), written for Phalanx.
//
// The autoscaler's own Go module is not served to this project, so the
// fields below are a hand-written copy of that API's JSON schema: the
// same names, JSON keys and meaning, nothing added. Only what Phalanx
// reads or writes is copied. Objects travel through the dynamic client
// and are converted with ToUnstructured and FromUnstructured; crd.yaml is
// the matching CustomResourceDefinition for the sandbox and tests (on a
// real cluster the autoscaler installs its own).
package autoscalingv1

import (
	_ "embed"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, version and resource of the autoscaler's API.
const (
	Group    = "autoscaling.x-k8s.io"
	Version  = "v1"
	Resource = "provisioningrequests"
	Kind     = "ProvisioningRequest"
)

// GroupVersionResource names the resource for the dynamic client.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// Condition types the autoscaler writes on a request's status.
const (
	// Accepted: the autoscaler took the request in and will try it.
	Accepted = "Accepted"
	// Provisioned: True once all the capacity asked for exists; False
	// while the autoscaler looks for it (reason CapacityIsNotFound).
	Provisioned = "Provisioned"
	// Failed: the request will not be fulfilled; terminal.
	Failed = "Failed"
	// BookingExpired: the capacity was provisioned but not used in time
	// and is no longer held for the request's pods.
	BookingExpired = "BookingExpired"
	// CapacityRevoked: capacity provisioned earlier is no longer valid.
	CapacityRevoked = "CapacityRevoked"
)

// Reasons the autoscaler writes with those conditions.
const (
	ReasonAccepted              = "Accepted"
	ReasonCapacityIsProvisioned = "CapacityIsProvisioned"
	ReasonCapacityIsFound       = "CapacityIsFound"
	ReasonCapacityIsNotFound    = "CapacityIsNotFound"
)

// Provisioning classes and the pod annotations that tie pods to a request.
const (
	// ClassBestEffortAtomicScaleUp provisions all the nodes a request's
	// pods need, or none of them.
	ClassBestEffortAtomicScaleUp = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
	// ConsumeAnnotation on a pod names the request whose capacity the pod
	// uses; the autoscaler then leaves the pod out of its ordinary,
	// pod-by-pod scale-ups.
	ConsumeAnnotation = "autoscaling.x-k8s.io/consume-provisioning-request"
	// ClassAnnotation on a pod names the request's class.
	ClassAnnotation = "autoscaling.x-k8s.io/provisioning-class-name"
	// LegacyConsumeAnnotation and LegacyClassAnnotation are the names
	// autoscaler releases before the v1 API read; both are written so
	// that either generation honours them.
	LegacyConsumeAnnotation = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
	LegacyClassAnnotation   = "cluster-autoscaler.kubernetes.io/provisioning-class-name"
)

// ProvisioningRequest asks the autoscaler for the capacity its pod sets
// need. Its spec is immutable.
type ProvisioningRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ProvisioningRequestSpec   `json:"spec"`
	Status            ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestSpec lists the pods to make room for.
type ProvisioningRequestSpec struct {
	// PodSets: 1 to 32 groups of identical pods.
	PodSets []PodSet `json:"podSets"`
	// ProvisioningClassName picks how the autoscaler provisions.
	ProvisioningClassName string `json:"provisioningClassName"`
	// Parameters are the class's own settings (at most 255 characters
	// each), e.g. ValidUntilSeconds for the atomic class.
	Parameters map[string]Parameter `json:"parameters,omitempty"`
}

// Parameter is a class parameter's value.
type Parameter string

// PodSet is Count pods shaped like the PodTemplate it references.
type PodSet struct {
	PodTemplateRef Reference `json:"podTemplateRef"`
	Count          int32     `json:"count"`
}

// Reference names an object in the request's namespace.
type Reference struct {
	Name string `json:"name,omitempty"`
}

// ProvisioningRequestStatus is written by the autoscaler.
type ProvisioningRequestStatus struct {
	Conditions               []metav1.Condition `json:"conditions,omitempty"`
	ProvisioningClassDetails map[string]Detail  `json:"provisioningClassDetails,omitempty"`
}

// Detail is a class's own status value.
type Detail string

// CRD is the CustomResourceDefinition of ProvisioningRequest, in YAML,
// for clusters where no autoscaler installed it (the sandbox and tests).
//
//go:embed crd.yaml
var CRD []byte
