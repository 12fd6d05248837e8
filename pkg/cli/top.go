package cli

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

func newTopCommand(o *Options) *cobra.Command {
	out := newOutputFlags()
	var keys []string
	var all bool
	cmd := &cobra.Command{
		Use:   "top",
		Short: "List the groups by state with their waiting time and the resources they hold, and the free room per domain",
		Long: `top lists every group hierarchy the scheduler knows, by its root: its stage,
for how long, its members (minimum, present, placed, bound) and what its
placed members request. Then, per topology domain (the zone and every key
a group uses, or --keys), the nodes' allocatable, what pods request there,
what the scheduler holds for pending pods, and what is free.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := out.printer()
			if err != nil {
				return err
			}
			ns := ""
			if !all {
				if ns, err = o.namespace(); err != nil {
					return err
				}
			}
			s, err := o.scheduler(cmd.Context())
			if err != nil {
				return err
			}
			path := debugapi.TopPath
			if len(keys) > 0 {
				path += "?keys=" + url.QueryEscape(strings.Join(keys, ","))
			}
			var top debugapi.Top
			body, err := s.do(cmd.Context(), "GET", path, nil, &top)
			if err != nil {
				return err
			}
			if p != nil {
				return printRaw(p, body, o.Out)
			}
			printTop(o.Out, &top, ns, time.Now())
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&keys, "keys", nil, "Node label keys whose domains to list (default: the zone and every group's topology key)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the groups of every namespace")
	out.addFlags(cmd)
	return cmd
}

func printTop(w io.Writer, t *debugapi.Top, namespace string, now time.Time) {
	fmt.Fprintf(w, "Groups (%s)\n", answeredBy(t.Scheduler, t.Profile, t.Time, t.Nodes))
	var rows [][]string
	for _, g := range t.Groups {
		if namespace != "" && g.Namespace != namespace {
			continue
		}
		kind := g.Kind
		if g.APIGroup != "" && g.APIGroup != "scheduling.phalanx.dev" {
			kind += "." + g.APIGroup
		}
		rows = append(rows, []string{g.Namespace, kind, g.Name, g.Policy, g.Stage, age(g.Since, now),
			fmt.Sprint(g.Min), fmt.Sprint(g.Present), fmt.Sprint(g.Placed), fmt.Sprint(g.Bound), fmt.Sprint(g.Pending), resources(g.Held)})
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		table(w, []string{"NAMESPACE", "KIND", "NAME", "POLICY", "STAGE", "FOR", "MIN", "PRESENT", "PLACED", "BOUND", "PENDING", "HELD"}, rows)
	}
	fmt.Fprintln(w, "\nFree room per domain")
	var names []string
	seen := map[string]bool{}
	for _, d := range t.Domains {
		for n := range d.Allocatable {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sortResources(names)
	header := []string{"KEY", "DOMAIN", "NODES"}
	for _, n := range names {
		header = append(header, strings.ToUpper(n)+" FREE/ALLOC")
	}
	header = append(header, "HELD FOR PENDING")
	rows = nil
	for _, d := range t.Domains {
		r := []string{d.Key, d.Value, fmt.Sprint(d.Nodes)}
		for _, n := range names {
			free, alloc := d.Free[n], d.Allocatable[n]
			if alloc == "" {
				r = append(r, "-")
				continue
			}
			r = append(r, free+"/"+alloc)
		}
		r = append(r, resources(d.Nominated))
		rows = append(rows, r)
	}
	table(w, header, rows)
}
