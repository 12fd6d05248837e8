package v1alpha1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateTopologyKey says what is wrong with a topology key, as the CRD
// schema does for TopologyConstraint.Key: nothing for a node label key or
// a device attribute key (DeviceAttributeKeyPrefix + domain/attribute).
// Places that take keys outside the schema (annotations, Go builders) use
// it to agree with the schema.
func ValidateTopologyKey(key string) []string {
	attr, device := strings.CutPrefix(key, DeviceAttributeKeyPrefix)
	if !device {
		return validation.IsQualifiedName(key)
	}
	domain, name, ok := strings.Cut(attr, "/")
	if !ok {
		return []string{fmt.Sprintf("a %s key names a device attribute by its fully qualified name, %s<domain>/<attribute>, e.g. %sgpu.nvidia.com/cliqueId", DeviceAttributeKeyPrefix, DeviceAttributeKeyPrefix, DeviceAttributeKeyPrefix)}
	}
	var errs []string
	for _, msg := range validation.IsDNS1123Subdomain(domain) {
		errs = append(errs, "device attribute domain: "+msg)
	}
	if len(validation.IsCIdentifier(name)) > 0 || len(name) > 32 {
		errs = append(errs, fmt.Sprintf("device attribute name %q must be a C identifier of at most 32 characters", name))
	}
	return errs
}
