package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

// outputFlags are kubectl's -o for the scheduler's answers: json, yaml,
// jsonpath and go-template through cli-runtime's printers; without -o a
// readable summary.
type outputFlags struct {
	format   string
	jsonYaml *genericclioptions.JSONYamlPrintFlags
	template *genericclioptions.KubeTemplatePrintFlags
}

func newOutputFlags() *outputFlags {
	return &outputFlags{jsonYaml: genericclioptions.NewJSONYamlPrintFlags(), template: genericclioptions.NewKubeTemplatePrintFlags()}
}

func (f *outputFlags) addFlags(cmd *cobra.Command) {
	f.jsonYaml.AddFlags(cmd)
	f.template.AddFlags(cmd)
	formats := append(f.jsonYaml.AllowedFormats(), f.template.AllowedFormats()...)
	cmd.Flags().StringVarP(&f.format, "output", "o", "", fmt.Sprintf("Output format. One of: (%s). Default: a summary for people.", strings.Join(formats, ", ")))
}

// printer returns the printer -o asks for, nil for the summary.
func (f *outputFlags) printer() (printers.ResourcePrinter, error) {
	if f.format == "" {
		if f.template.TemplateArgument != nil && *f.template.TemplateArgument != "" {
			return f.template.ToPrinter("go-template")
		}
		return nil, nil
	}
	if p, err := f.jsonYaml.ToPrinter(f.format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	return f.template.ToPrinter(f.format)
}

// printRaw prints an answer as received (it carries apiVersion and kind).
func printRaw(p printers.ResourcePrinter, body []byte, w io.Writer) error {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(body); err != nil {
		return fmt.Errorf("read the scheduler's answer: %w", err)
	}
	return p.PrintObj(obj, w)
}

// age words how long ago t was, as kubectl does.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// table writes rows aligned in columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// resources words quantities sorted by name, e.g. "4 cpu, 16Gi memory".
func resources(r map[string]string) string {
	if len(r) == 0 {
		return "-"
	}
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sortResources(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		if class, ok := strings.CutPrefix(n, debugapi.DeviceResourcePrefix); ok {
			unit := "devices"
			if r[n] == "1" {
				unit = "device"
			}
			parts = append(parts, fmt.Sprintf("%s %s of class %s", r[n], unit, class))
			continue
		}
		parts = append(parts, r[n]+" "+n)
	}
	return strings.Join(parts, ", ")
}

// sortResources puts cpu and memory first, then the rest by name.
func sortResources(names []string) {
	rank := func(n string) string {
		switch n {
		case "cpu":
			return "0"
		case "memory":
			return "1"
		case "pods":
			return "3"
		}
		return "2" + n
	}
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && rank(names[j]) < rank(names[j-1]); j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
}

func groupName(kind, apiGroup, ns, name string) string {
	if apiGroup == "" || apiGroup == "scheduling.phalanx.dev" {
		return fmt.Sprintf("%s %s/%s", kind, ns, name)
	}
	return fmt.Sprintf("%s.%s %s/%s", kind, apiGroup, ns, name)
}

func answeredBy(scheduler, profile string, at metav1.Time, nodes int) string {
	s := fmt.Sprintf("answered by scheduler %q", scheduler)
	if profile != "" {
		s += fmt.Sprintf(" (profile %s)", profile)
	}
	s += " at " + at.Local().Format("15:04:05")
	if nodes > 0 {
		s += fmt.Sprintf(", from its view of %d nodes", nodes)
	}
	return s
}
