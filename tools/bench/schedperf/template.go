package schedperf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/template"

	"sigs.k8s.io/yaml"
)

// The arithmetic scheduler_perf's object templates call, by the names they
// call it. Numbers arrive as ints, floats or numeric strings; the *Int
// functions truncate their float result.
var templateFuncs = template.FuncMap{
	"AddInt":        func(n ...any) (int, error) { return truncated(fold(n, 0, func(a, b float64) float64 { return a + b })) },
	"AddFloat":      func(n ...any) (float64, error) { return fold(n, 0, func(a, b float64) float64 { return a + b }) },
	"MultiplyInt":   func(n ...any) (int, error) { return truncated(fold(n, 1, func(a, b float64) float64 { return a * b })) },
	"MultiplyFloat": func(n ...any) (float64, error) { return fold(n, 1, func(a, b float64) float64 { return a * b }) },
	"SubtractInt": func(a, b any) (int, error) {
		return truncated(binary(a, b, func(x, y float64) (float64, error) { return x - y, nil }))
	},
	"SubtractFloat": func(a, b any) (float64, error) {
		return binary(a, b, func(x, y float64) (float64, error) { return x - y, nil })
	},
	"DivideInt":   func(a, b any) (int, error) { return truncated(binary(a, b, divide)) },
	"DivideFloat": func(a, b any) (float64, error) { return binary(a, b, divide) },
	"Mod": func(a, b any) (int, error) {
		x, err := number(a)
		if err != nil {
			return 0, err
		}
		y, err := number(b)
		if err != nil {
			return 0, err
		}
		if int(y) == 0 {
			return 0, errors.New("modulo by zero")
		}
		return int(x) % int(y), nil
	},
	"Int": func(v any) (int, error) { return truncated(number(v)) },
	"JSON": func(v any) (string, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return "", err
		}
		return string(bytes.TrimSpace(b.Bytes())), nil
	},
}

func number(v any) (float64, error) {
	switch n := v.(type) {
	case int:
		return float64(n), nil
	case int32:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case uint:
		return float64(n), nil
	case uint32:
		return float64(n), nil
	case uint64:
		return float64(n), nil
	case float32:
		return float64(n), nil
	case float64:
		return n, nil
	case string:
		if f, err := strconv.ParseFloat(n, 64); err == nil {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%v (%T) is not a number", v, v)
}

func fold(args []any, start float64, op func(a, b float64) float64) (float64, error) {
	acc := start
	for _, a := range args {
		f, err := number(a)
		if err != nil {
			return 0, err
		}
		acc = op(acc, f)
	}
	return acc, nil
}

func binary(a, b any, op func(x, y float64) (float64, error)) (float64, error) {
	x, err := number(a)
	if err != nil {
		return 0, err
	}
	y, err := number(b)
	if err != nil {
		return 0, err
	}
	return op(x, y)
}

func divide(x, y float64) (float64, error) {
	if y == 0 {
		return 0, errors.New("division by zero")
	}
	return x / y, nil
}

func truncated(f float64, err error) (int, error) { return int(f), err }

// objectTemplate is one parsed template file, rendered once per object.
type objectTemplate struct {
	path string
	tmpl *template.Template
}

func parseTemplate(path string) (*objectTemplate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := template.New(path).Funcs(templateFuncs).Parse(string(data))
	if err != nil {
		return nil, fmt.Errorf("parse template %s: %w", path, err)
	}
	return &objectTemplate{path: path, tmpl: t}, nil
}

// render executes the template with params plus Index and Count and
// decodes the YAML into out, strictly: a field out's type lacks is an
// error, as it is for the API server when upstream creates the object.
func (t *objectTemplate) render(params map[string]any, index, count int, out any) error {
	env := make(map[string]any, len(params)+2)
	for k, v := range params {
		env[k] = v
	}
	env["Index"], env["Count"] = index, count
	var b bytes.Buffer
	if err := t.tmpl.Execute(&b, env); err != nil {
		return fmt.Errorf("render %s (Index %d): %w", t.path, index, err)
	}
	if err := yaml.UnmarshalStrict(b.Bytes(), out); err != nil {
		return fmt.Errorf("decode %s (Index %d): %w\n%s", t.path, index, err, b.String())
	}
	return nil
}
