// Command shardtest runs the top-level tests of one compiled test binary in
// several processes at once and writes their `go test -json` events to
// stdout, one shard after another, for hack/testreport to read.
//
// The integration tests each start a control plane of their own, but in
// one process they share process-wide state (feature gates flipped while a
// scheduler is built, the metrics registry the bench reads), so they cannot
// run with t.Parallel. Separate processes share nothing, and most of a
// test's time is spent waiting on the scheduler (the suite used half a
// core on average), so four of them on two cores take about a third of
// the time of one.
//
// Tests are dealt to shards longest first (by the durations in -times, a
// file of "package<TAB>test<TAB>seconds" lines such as testreport -record
// writes; tests missing from it count -default seconds), each to the shard
// with the least time so far.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

func main() {
	binary := flag.String("binary", "", "the compiled test binary (go test -c)")
	pkg := flag.String("package", "", "the binary's import path, for the events")
	shards := flag.Int("shards", 2, "processes at once")
	timesFile := flag.String("times", "", "known test durations")
	def := flag.Float64("default", 10, "seconds assumed for a test the times file lacks")
	timeout := flag.String("timeout", "60m", "each shard's -test.timeout")
	dir := flag.String("dir", ".", "the package's directory: go test runs a test binary there")
	flag.Parse()
	if *binary == "" || *pkg == "" {
		fmt.Fprintln(os.Stderr, "shardtest: -binary and -package are required")
		os.Exit(2)
	}
	tests, err := list(*binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardtest:", err)
		os.Exit(1)
	}
	known := map[string]float64{}
	if *timesFile != "" {
		if known, err = readTimes(*timesFile, *pkg); err != nil {
			fmt.Fprintln(os.Stderr, "shardtest:", err)
			os.Exit(1)
		}
	}
	plan := deal(tests, known, *def, *shards)
	outs := make([]bytes.Buffer, len(plan))
	errs := make([]error, len(plan))
	var wg sync.WaitGroup
	for i, names := range plan {
		if len(names) == 0 {
			continue
		}
		wg.Add(1)
		go func(i int, names []string) {
			defer wg.Done()
			cmd := exec.Command("go", "tool", "test2json", "-t", "-p", *pkg, *binary,
				"-test.v=test2json", "-test.count=1", "-test.timeout="+*timeout,
				"-test.run=^("+strings.Join(quote(names), "|")+")$")
			cmd.Dir = *dir
			cmd.Stdout = &outs[i]
			cmd.Stderr = &outs[i]
			errs[i] = cmd.Run()
		}(i, names)
	}
	wg.Wait()
	failed := false
	for i := range plan {
		os.Stdout.Write(outs[i].Bytes())
		if errs[i] != nil {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// list asks the binary for its top-level tests.
func list(binary string) ([]string, error) {
	out, err := exec.Command(binary, "-test.list", ".*").Output() // #nosec G204 -- the binary is ours
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %w", binary, err)
	}
	var tests []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if name := strings.TrimSpace(sc.Text()); strings.HasPrefix(name, "Test") {
			tests = append(tests, name)
		}
	}
	return tests, sc.Err()
}

func readTimes(path, pkg string) (map[string]float64, error) {
	out := map[string]float64{}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		// Every test then counts the default: the shards are still
		// valid, only less even.
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 || f[0] != pkg {
			continue
		}
		if s, err := strconv.ParseFloat(f[2], 64); err == nil {
			out[f[1]] = s
		}
	}
	return out, nil
}

// deal gives each test, longest first, to the shard with the least time.
func deal(tests []string, known map[string]float64, def float64, shards int) [][]string {
	if shards < 1 {
		shards = 1
	}
	cost := func(t string) float64 {
		if s, ok := known[t]; ok {
			return s
		}
		return def
	}
	sorted := append([]string(nil), tests...)
	sort.SliceStable(sorted, func(i, j int) bool { return cost(sorted[i]) > cost(sorted[j]) })
	plan := make([][]string, shards)
	load := make([]float64, shards)
	for _, t := range sorted {
		best := 0
		for i := range load {
			if load[i] < load[best] {
				best = i
			}
		}
		plan[best] = append(plan[best], t)
		load[best] += cost(t)
	}
	return plan
}

func quote(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = regexp.QuoteMeta(n)
	}
	return out
}
