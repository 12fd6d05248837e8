package autoscalingv1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured reads a request the dynamic client returned.
func FromUnstructured(u *unstructured.Unstructured) (*ProvisioningRequest, error) {
	pr := &ProvisioningRequest{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pr); err != nil {
		return nil, fmt.Errorf("read ProvisioningRequest %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return pr, nil
}

// ToUnstructured turns pr into what the dynamic client sends, with its
// apiVersion and kind set.
func ToUnstructured(pr *ProvisioningRequest) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pr)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(Group + "/" + Version)
	u.SetKind(Kind)
	return u, nil
}
