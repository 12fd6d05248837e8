package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const stream = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    a_test.go:9: want 3 bound, got 2\n"}
{"Action":"fail","Package":"p","Test":"TestA/sub","Elapsed":1.5}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":2.5}
{"Action":"output","Package":"p","Test":"TestB","Output":"quiet line of a passing test\n"}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":7.25}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"panic: runtime error: invalid memory address\n"}
{"Action":"fail","Package":"p","Elapsed":10}
# q
q/x.go:3:1: syntax error
{"Action":"output","Package":"q","Output":"FAIL\tq [build failed]\n"}
{"Action":"fail","Package":"q","Elapsed":0}
`

func TestReportPrintsFailuresWholeAndPassesQuietly(t *testing.T) {
	var out bytes.Buffer
	times, failed := report(strings.NewReader(stream), &out)
	if !failed {
		t.Fatal("a failing test and a package that did not build must fail the report")
	}
	got := out.String()
	for _, want := range []string{"want 3 bound, got 2", "FAIL\tp\t10.0s", "TestC did not finish", "panic: runtime error", "q/x.go:3:1: syntax error", "FAIL\tq [build failed]"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet line") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
	if len(times) != 2 {
		t.Fatalf("want the 2 top-level tests timed, got %+v", times)
	}
}

func TestSlowestAcrossRecordedRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "times.tsv")
	if err := appendRecord(path, []timing{{pkg: "a", test: "TestFast", seconds: 1}, {pkg: "a", test: "TestSlow", seconds: 90}}); err != nil {
		t.Fatal(err)
	}
	if err := appendRecord(path, []timing{{pkg: "b", test: "TestMiddle", seconds: 30, failed: true}}); err != nil {
		t.Fatal(err)
	}
	times, err := readRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printSlowest(&out, times, 2)
	want := "The 2 slowest tests:\n    90.0s  a TestSlow\n    30.0s  b TestMiddle (FAILED)\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
