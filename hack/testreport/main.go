// Command testreport reads `go test -json` on stdin and prints what a
// person reading a CI log needs: one line per package, the whole output of
// every failing test, and the slowest tests. It exits 1 when a test or a
// package failed, so a Makefile recipe fails with it.
//
// -record appends each top-level test's duration to a file, and -summarize
// prints the slowest tests across every recorded run: `make test` runs
// several `go test` invocations and ends with one list.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// event is the part of test2json's output this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type timing struct {
	pkg, test string
	seconds   float64
	failed    bool
}

func main() {
	record := flag.String("record", "", "append top-level test durations to this file")
	slowest := flag.Int("slowest", 15, "how many of the slowest tests to print")
	summarize := flag.String("summarize", "", "print the slowest tests recorded in this file and exit")
	flag.Parse()
	if *summarize != "" {
		times, err := readRecord(*summarize)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		printSlowest(os.Stdout, times, *slowest)
		return
	}
	times, failed := report(os.Stdin, os.Stdout)
	if failed && *slowest == 0 {
		// A failed run stops `make test` before its summary: say here which
		// tests took the time (a timeout is often the failure).
		*slowest = 15
	}
	printSlowest(os.Stdout, times, *slowest)
	if *record != "" {
		if err := appendRecord(*record, times); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// report streams package results and failing tests' output to w and
// returns every top-level test's duration and whether anything failed.
func report(r io.Reader, w io.Writer) ([]timing, bool) {
	// Output is kept per test until the test ends: only a failing test's is
	// printed, whole and in order. A package's own output (build errors, a
	// panic outside any test, TestMain) is kept under "".
	output := map[string]map[string][]string{}
	var times []timing
	failed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not test2json (go vet or the compiler writing to stderr
			// merged in): pass it through.
			fmt.Fprintln(w, string(line))
			continue
		}
		if output[e.Package] == nil {
			output[e.Package] = map[string][]string{}
		}
		switch e.Action {
		case "output", "build-output":
			output[e.Package][e.Test] = append(output[e.Package][e.Test], e.Output)
			if e.Test != "" && strings.Contains(e.Test, "/") {
				// A subtest's lines also belong to its top-level test, which
				// is what gets printed when it fails.
				top := e.Test[:strings.Index(e.Test, "/")]
				output[e.Package][top] = append(output[e.Package][top], e.Output)
			}
		case "pass", "fail", "skip":
			switch {
			case e.Test == "":
				status := "ok  "
				if e.Action == "skip" {
					// No test files: not worth a line.
					delete(output, e.Package)
					continue
				}
				if e.Action == "fail" {
					status = "FAIL"
					failed = true
					// Output outside any test explains a package that failed
					// without a failing test (build error, timeout); a test
					// that never ended was running when the binary died (a
					// panic, often in another goroutine): its output holds
					// the stack.
					for _, l := range output[e.Package][""] {
						fmt.Fprint(w, l)
					}
					for test, lines := range output[e.Package] {
						if test == "" || strings.Contains(test, "/") {
							continue
						}
						fmt.Fprintf(w, "--- %s did not finish:\n", test)
						for _, l := range lines {
							fmt.Fprint(w, l)
						}
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%.1fs\n", status, e.Package, e.Elapsed)
				delete(output, e.Package)
			case !strings.Contains(e.Test, "/"):
				times = append(times, timing{pkg: e.Package, test: e.Test, seconds: e.Elapsed, failed: e.Action == "fail"})
				if e.Action == "fail" {
					failed = true
					for _, l := range output[e.Package][e.Test] {
						fmt.Fprint(w, l)
					}
				}
				delete(output[e.Package], e.Test)
			default:
				delete(output[e.Package], e.Test)
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(w, "testreport:", err)
		failed = true
	}
	return times, failed
}

func printSlowest(w io.Writer, times []timing, n int) {
	if n <= 0 || len(times) == 0 {
		return
	}
	sort.SliceStable(times, func(i, j int) bool { return times[i].seconds > times[j].seconds })
	if len(times) > n {
		times = times[:n]
	}
	fmt.Fprintf(w, "The %d slowest tests:\n", len(times))
	for _, t := range times {
		mark := ""
		if t.failed {
			mark = " (FAILED)"
		}
		fmt.Fprintf(w, "%8.1fs  %s %s%s\n", t.seconds, t.pkg, t.test, mark)
	}
}

func appendRecord(path string, times []timing) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, t := range times {
		fmt.Fprintf(f, "%s\t%s\t%.2f\t%t\n", t.pkg, t.test, t.seconds, t.failed)
	}
	return f.Close()
}

func readRecord(path string) ([]timing, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var times []timing
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			continue
		}
		s, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v", path, line, err)
		}
		times = append(times, timing{pkg: f[0], test: f[1], seconds: s, failed: f[3] == "true"})
	}
	return times, nil
}
