// Package v1alpha1 holds the scheduling.phalanx.dev API: Workload, PodGroup and
// CompositePodGroup.
//
// The kinds and field names mirror upstream scheduling.k8s.io/v1beta1 (Workload,
// PodGroup) and v1alpha3 (CompositePodGroup) so that a manifest written for the
// upstream API needs only its apiVersion changed. Phalanx serves them as CRDs,
// which makes them available on clusters whose API server does not serve the
// upstream group (it is off by default in Kubernetes 1.37).
//
// Validation lives in the CRD schema (OpenAPI and CEL x-kubernetes-validations),
// so the API server rejects bad objects with messages that name the field.
//
// +k8s:deepcopy-gen=package
// +groupName=scheduling.phalanx.dev
package v1alpha1
