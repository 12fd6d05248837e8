package pluginrt

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// DecodeArgs decodes a Phalanx plugin's args into `into`, refusing fields
// the args do not have and fields given twice. kube-scheduler decodes the
// args of its in-tree plugins as strictly; out-of-tree args reach a plugin
// as raw JSON, and a lenient decode would let a misspelt field (a
// `reservaton:` block) silently turn a feature off.
func DecodeArgs(obj runtime.Object, into any) error {
	if obj == nil {
		return nil
	}
	raw, ok := obj.(*runtime.Unknown)
	if !ok {
		return fmt.Errorf("want args of type runtime.Unknown, got %T", obj)
	}
	if raw.Raw == nil {
		return nil
	}
	data := raw.Raw
	switch raw.ContentType {
	case runtime.ContentTypeJSON, "":
	case runtime.ContentTypeYAML:
		var err error
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return err
		}
	default:
		return fmt.Errorf("args of content type %s are not supported", raw.ContentType)
	}
	strict, err := sigsjson.UnmarshalStrict(data, into, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
