package v1alpha1

import "testing"

func TestValidateTopologyKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"topology.kubernetes.io/zone": true,
		"rack":                        true,
		"device.phalanx.dev/gpu.nvidia.com/cliqueId":         true,
		"device.phalanx.dev/resource.kubernetes.io/pcieRoot": true,
		"device.phalanx.dev/cliqueId":                        false,
		"device.phalanx.dev/gpu.nvidia.com/clique-id":        false,
		"device.phalanx.dev/GPU/cliqueId":                    false,
		"a/b/c":                                              false,
	} {
		if errs := ValidateTopologyKey(key); (len(errs) == 0) != ok {
			t.Errorf("%s: got %v, want valid=%v", key, errs, ok)
		}
	}
}
