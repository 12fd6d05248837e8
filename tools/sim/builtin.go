package sim

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

//go:embed scenarios/*.yaml
var builtinFS embed.FS

// Builtins decodes the scenarios shipped with Phalanx, by name.
func Builtins() ([]*Scenario, error) {
	files, err := fs.Glob(builtinFS, "scenarios/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := make([]*Scenario, 0, len(files))
	for _, f := range files {
		data, err := builtinFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sc, err := Decode(data)
		if err != nil {
			return nil, fmt.Errorf("built-in scenario %s: %w", f, err)
		}
		if want := strings.TrimSuffix(path.Base(f), ".yaml"); sc.Name != want {
			return nil, fmt.Errorf("built-in scenario %s is named %q; name it %q after its file", f, sc.Name, want)
		}
		sc.Source = "built-in"
		out = append(out, sc)
	}
	return out, nil
}

// Load resolves a command-line argument: "all" (every built-in scenario),
// the name of a built-in scenario, or the path of a scenario file.
func Load(arg string) ([]*Scenario, error) {
	builtins, err := Builtins()
	if err != nil {
		return nil, err
	}
	if arg == "all" {
		return builtins, nil
	}
	for _, sc := range builtins {
		if sc.Name == arg {
			return []*Scenario{sc}, nil
		}
	}
	data, err := os.ReadFile(arg)
	if errors.Is(err, fs.ErrNotExist) {
		names := make([]string, len(builtins))
		for i, sc := range builtins {
			names[i] = sc.Name
		}
		return nil, fmt.Errorf("%q is neither a built-in scenario (%s, or all) nor a file", arg, strings.Join(names, ", "))
	}
	if err != nil {
		return nil, err
	}
	sc, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arg, err)
	}
	sc.Source = arg
	return []*Scenario{sc}, nil
}
