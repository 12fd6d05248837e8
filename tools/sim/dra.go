package sim

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The drivers a scenario's dra block publishes, each selected by the
// DeviceClass of the same name. GPUDriver is the sandbox's driver
// (phalanx-sim up --dra-devices), so the sample manifests work in both.
const (
	GPUDriver     = "gpu.phalanx.dev"
	ChannelDriver = "channel.phalanx.dev"
)

// claimDevices gives pod a claim from template and the shared claim, both
// used by its container; "" leaves either out.
func claimDevices(pod *corev1.Pod, template, shared string) {
	add := func(pc corev1.PodResourceClaim) {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, pc)
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].Resources.Claims = append(pod.Spec.Containers[i].Resources.Claims, corev1.ResourceClaim{Name: pc.Name})
		}
	}
	if template != "" {
		add(corev1.PodResourceClaim{Name: "devices", ResourceClaimTemplateName: ptr.To(template)})
	}
	if shared != "" {
		add(corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To(shared)})
	}
}

// publishDevices creates the dra block's DeviceClasses (unless they
// exist) and ResourceSlices for nodes, remembering what it created for
// the teardown.
func (r *runner) publishDevices(ctx context.Context, nodes []*corev1.Node) error {
	d := r.sc.Cluster.DRA
	if d == nil {
		return nil
	}
	res := r.cl.Client.ResourceV1()
	class := func(driver string) error {
		_, err := res.DeviceClasses().Create(ctx, &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: driver},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
			}}},
		}, metav1.CreateOptions{})
		switch {
		case err == nil:
			r.deviceClasses = append(r.deviceClasses, driver)
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("create DeviceClass %s: %w", driver, err)
		}
		return nil
	}
	slice := func(s *resourceapi.ResourceSlice) error {
		if _, err := res.ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ResourceSlice %s: %w", s.Name, err)
		}
		r.slices = append(r.slices, s.Name)
		return nil
	}
	devices := func(prefix string, n int) []resourceapi.Device {
		out := make([]resourceapi.Device, n)
		for i := range out {
			out[i] = resourceapi.Device{Name: fmt.Sprintf("%s-%d", prefix, i)}
		}
		return out
	}
	if d.DevicesPerNode > 0 {
		if err := class(GPUDriver); err != nil {
			return err
		}
		for _, n := range nodes {
			if err := slice(&resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "sim-" + r.ns + "-" + n.Name},
				Spec: resourceapi.ResourceSliceSpec{Driver: GPUDriver, NodeName: ptr.To(n.Name),
					Pool: resourceapi.ResourcePool{Name: n.Name, ResourceSliceCount: 1}, Devices: devices("gpu", d.DevicesPerNode)},
			}); err != nil {
				return err
			}
		}
	}
	if d.DomainKey != "" && d.DomainDevices > 0 {
		if err := class(ChannelDriver); err != nil {
			return err
		}
		key := resolveKey(d.DomainKey)
		seen := map[string]bool{}
		for _, n := range nodes {
			v, ok := n.Labels[key]
			if !ok || seen[v] {
				continue
			}
			seen[v] = true
			if err := slice(&resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "sim-" + r.ns + "-" + v},
				Spec: resourceapi.ResourceSliceSpec{Driver: ChannelDriver,
					NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{v}}}}}},
					Pool: resourceapi.ResourcePool{Name: v, ResourceSliceCount: 1}, Devices: devices("channel", d.DomainDevices)},
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// unpublishDevices removes the claims of the scenario's namespace (its
// pods are gone, so no device is in use), then the slices and classes
// publishDevices made. Claims left behind would keep their devices
// allocated for a later scenario whose nodes have the same names.
func (r *runner) unpublishDevices(ctx context.Context) error {
	var errs []error
	if r.ns != "" {
		api := r.api()
		for _, res := range []*kindAPI{api.claims, api.claimTemplates} {
			if err := res.deleteAll(ctx, metav1.DeleteOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("delete %ss of %s: %w", res.kind, r.ns, err))
			}
		}
	}
	res := r.cl.Client.ResourceV1()
	for _, name := range r.slices {
		if err := res.ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete ResourceSlice %s: %w", name, err))
		}
	}
	for _, name := range r.deviceClasses {
		if err := res.DeviceClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete DeviceClass %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
