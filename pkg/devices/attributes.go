package devices

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// AttributeValues lists the distinct values of attribute (fully
// qualified: domain/name) among the devices node can use that match one
// of classes (every device when classes is empty): the devices of its own
// slices and those that shared slices offer it. Devices without the
// attribute are not counted: a claim may mix kinds of devices (a GPU and
// a NIC), and only some of them carry a topology attribute.
func (v *View) AttributeValues(node *corev1.Node, attribute string, classes []string) []string {
	var out []string
	add := func(s *resourceapi.ResourceSlice, d *resourceapi.Device) {
		val, ok := attributeValue(s.Spec.Driver, d, attribute)
		if !ok {
			return
		}
		for _, o := range out {
			if o == val {
				return
			}
		}
		out = append(out, val)
	}
	visit := func(s *resourceapi.ResourceSlice, reaches func(*resourceapi.Device) bool) {
		var matching map[string]bool
		if len(classes) > 0 {
			matching = map[string]bool{}
			for _, class := range classes {
				for _, name := range v.m.matching(v.ctx, s, v.src.Classes, class) {
					matching[name] = true
				}
			}
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if (matching == nil || matching[d.Name]) && reaches(d) {
				add(s, d)
			}
		}
	}
	for _, s := range v.local[node.Name] {
		visit(s, func(*resourceapi.Device) bool { return true })
	}
	for _, s := range v.shared {
		switch {
		case s.Spec.AllNodes != nil && *s.Spec.AllNodes:
			visit(s, func(*resourceapi.Device) bool { return true })
		case s.Spec.NodeSelector != nil:
			if selects(s.Spec.NodeSelector, node) {
				visit(s, func(*resourceapi.Device) bool { return true })
			}
		case s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection:
			visit(s, func(d *resourceapi.Device) bool {
				switch {
				case d.AllNodes != nil && *d.AllNodes:
					return true
				case d.NodeName != nil:
					return *d.NodeName == node.Name
				case d.NodeSelector != nil:
					return selects(d.NodeSelector, node)
				}
				return false
			})
		}
	}
	return out
}

func selects(sel *corev1.NodeSelector, node *corev1.Node) bool {
	ns, err := nodeaffinity.NewNodeSelector(sel)
	return err == nil && ns.Match(node)
}

// attributeValue is d's value of attribute as text. An attribute in the
// driver's own domain may be published without its domain, as the
// allocator's matchAttribute reads it.
func attributeValue(driver string, d *resourceapi.Device, attribute string) (string, bool) {
	a, ok := d.Attributes[resourceapi.QualifiedName(attribute)]
	if !ok {
		domain, name, _ := strings.Cut(attribute, "/")
		if domain != driver {
			return "", false
		}
		if a, ok = d.Attributes[resourceapi.QualifiedName(name)]; !ok {
			return "", false
		}
	}
	switch {
	case a.StringValue != nil:
		return *a.StringValue, true
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10), true
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue), true
	case a.VersionValue != nil:
		return *a.VersionValue, true
	}
	return "", false
}
