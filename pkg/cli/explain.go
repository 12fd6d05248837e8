package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

func newExplainCommand(o *Options) *cobra.Command {
	out := newOutputFlags()
	cmd := &cobra.Command{
		Use:   "explain (pod|podgroup|compositepodgroup|workload)[.API-GROUP] NAME",
		Short: "Say where a gang stands and why it is pending, as the scheduler sees it",
		Long: `explain asks the scheduler about a pod's group, a group, or the groups of a
Workload: its stage (waiting for pods, infeasible, waiting in Permit,
binding, scheduled, preempting), its members present, minimum and bound, and
for a group that does not fit, the domains its planner tried with what is
short in each, and the victims preemption would need or why it may not
preempt. The plan is made fresh by the scheduler's planner on its current
view, exactly as its next attempt would make it.

Kinds take an API group to pick among the APIs Phalanx reads:
podgroups.scheduling.k8s.io, podgroups.scheduling.x-k8s.io; ppg, pcpg and
pwl are Phalanx's own.`,
		Example: `  kubectl phalanx explain podgroup trainer
  kubectl phalanx explain pod trainer-3 -n team-a
  kubectl phalanx explain podgroups.scheduling.k8s.io/trainer -o yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name := args[0], ""
			if len(args) == 2 {
				name = args[1]
			} else if k, n, ok := strings.Cut(args[0], "/"); ok {
				kind, name = k, n
			}
			if name == "" {
				return fmt.Errorf("name what to explain: %s TYPE NAME, or TYPE/NAME", cmd.CommandPath())
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			p, err := out.printer()
			if err != nil {
				return err
			}
			s, err := o.scheduler(cmd.Context())
			if err != nil {
				return err
			}
			var list debugapi.ExplanationList
			body, err := s.do(cmd.Context(), "GET", fmt.Sprintf("%s/%s/%s/%s", debugapi.ExplainPath, kind, ns, name), nil, &list)
			if err != nil {
				return err
			}
			if p != nil {
				return printRaw(p, body, o.Out)
			}
			printExplanations(o.Out, &list, time.Now())
			return nil
		},
	}
	out.addFlags(cmd)
	return cmd
}

func printExplanations(w io.Writer, l *debugapi.ExplanationList, now time.Time) {
	fmt.Fprintf(w, "%s: %s\n", l.Target, answeredBy(l.Scheduler, l.Profile, l.Time, l.Nodes))
	for i := range l.Items {
		fmt.Fprintln(w)
		printExplanation(w, &l.Items[i], now)
	}
}

func printExplanation(w io.Writer, e *debugapi.Explanation, now time.Time) {
	r := e.Root
	if r.Name != "" {
		fmt.Fprintf(w, "%s\n", groupName(r.Kind, r.APIGroup, r.Namespace, r.Name))
	}
	stage := e.Stage
	if e.Since != nil {
		stage += ", for " + age(e.Since, now)
	}
	fmt.Fprintf(w, "  Stage:  %s\n", stage)
	fmt.Fprintf(w, "  Why:    %s\n", e.Message)
	if len(e.Groups) > 0 {
		fmt.Fprintln(w)
		var rows [][]string
		for _, g := range e.Groups {
			name := groupName(g.Kind, g.APIGroup, g.Namespace, g.Name)
			if g.Parent != "" {
				name = "└ " + name
			}
			topo := g.TopologyKey
			if topo == "" {
				topo = "-"
			}
			rows = append(rows, []string{"  " + name, g.Policy, fmt.Sprint(g.Min), fmt.Sprint(g.Present), fmt.Sprint(g.Placed), fmt.Sprint(g.Bound), topo, age(g.Created, now)})
		}
		table(w, []string{"  GROUP", "POLICY", "MIN", "PRESENT", "PLACED", "BOUND", "TOPOLOGY", "AGE"}, rows)
	}
	if a := e.Assessment; a != nil {
		printAssessment(w, a, "  ", true)
	}
	if ev := e.Preemption; ev != nil {
		fmt.Fprintf(w, "\n  Preempted %s ago: %s", age(&ev.At, now), strings.Join(ev.Victims, ", "))
		if len(ev.Left) > 0 {
			fmt.Fprintf(w, " (%d still terminating)", len(ev.Left))
		}
		fmt.Fprintln(w)
	}
	var conds [][]string
	for _, g := range e.Groups {
		for _, c := range g.Conditions {
			conds = append(conds, []string{"  " + g.Name, c.Type, c.Status, c.Reason, age(&c.Since, now), c.Message})
		}
	}
	if len(conds) > 0 {
		fmt.Fprintln(w, "\n  Conditions:")
		table(w, []string{"  GROUP", "TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}, conds)
	}
	if sp := e.StoredPlan; sp != nil {
		verdict := "places the group"
		if sp.Infeasible != "" {
			verdict = "infeasible"
		}
		fmt.Fprintf(w, "\n  The scheduler holds a plan made %s ago: %s\n", age(&sp.Made, now), verdict)
	}
}

// printAssessment prints the planner's and the victim search's answers.
func printAssessment(w io.Writer, a *debugapi.Assessment, indent string, showPlan bool) {
	switch {
	case a.Blocked != "":
		fmt.Fprintf(w, "\n%sNot planned: %s\n", indent, a.Blocked)
	case a.Fits && showPlan:
		fmt.Fprintf(w, "\n%sPlan: %s\n", indent, placementSummary(a.Placement))
	case a.Infeasible != nil:
		printInfeasible(w, a.Infeasible, indent)
	}
	printDevices(w, a.Devices, indent)
	if pr := a.Preemption; pr != nil {
		if !pr.Possible {
			fmt.Fprintf(w, "\n%sPreemption: no. %s\n", indent, pr.Reason)
			return
		}
		fmt.Fprintf(w, "\n%sPreemption: evicting %d pods of priority below %d makes it fit (%s):\n", indent, len(pr.Victims), pr.Priority, placementSummary(pr.Placement))
		var rows [][]string
		for _, v := range pr.Victims {
			group, pdb := v.Group, ""
			if group == "" {
				group = "-"
			}
			if v.ViolatesPDB {
				pdb = "yes"
			}
			rows = append(rows, []string{indent + v.Pod, v.Node, fmt.Sprint(v.Priority), group, pdb})
		}
		table(w, []string{indent + "VICTIM", "NODE", "PRIORITY", "EVICTED WITH", "BREAKS PDB"}, rows)
	}
}

func printInfeasible(w io.Writer, inf *debugapi.Infeasible, indent string) {
	for e := inf; e != nil; e = e.Cause {
		if len(e.Domains) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s%s: %s domains tried, closest first:\n", indent, e.Group, e.TopologyKey)
		var rows [][]string
		for _, d := range e.Domains {
			rows = append(rows, []string{indent + d.Domain, fmt.Sprintf("%d/%d", d.Fits, d.Need), resources(d.Short)})
		}
		table(w, []string{indent + "DOMAIN", "FITS", "SHORT"}, rows)
	}
}

// printDevices prints the devices of the classes the group claims, per
// domain of its topology levels.
func printDevices(w io.Writer, devs []debugapi.DomainDevices, indent string) {
	if len(devs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%sDRA devices the plan counts, per domain:\n", indent)
	var rows [][]string
	for _, d := range devs {
		key, domain := d.Key, d.Domain
		if key == "" {
			key, domain = "-", "(cluster)"
		}
		rows = append(rows, []string{indent + key, domain, d.Class, fmt.Sprintf("%d/%d", d.Free, d.Total)})
	}
	table(w, []string{indent + "KEY", "DOMAIN", "CLASS", "FREE/TOTAL"}, rows)
}

func placementSummary(p *debugapi.Placement) string {
	if p == nil {
		return "-"
	}
	nodes := map[string]bool{}
	for _, n := range p.Pods {
		nodes[n] = true
	}
	s := fmt.Sprintf("%d pods on %d nodes", len(p.Pods), len(nodes))
	var ds []string
	for _, d := range p.Domains {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	if len(ds) > 0 {
		s += " in " + strings.Join(dedupe(ds), ", ")
	}
	if len(p.Unplaced) > 0 {
		s += fmt.Sprintf("; %d more wait", len(p.Unplaced))
	}
	return s
}

func dedupe(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
