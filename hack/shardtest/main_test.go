package main

import (
	"reflect"
	"testing"
)

func TestDealBalancesLongestFirst(t *testing.T) {
	known := map[string]float64{"TestA": 100, "TestB": 60, "TestC": 50, "TestD": 5}
	plan := deal([]string{"TestD", "TestC", "TestB", "TestA", "TestNew"}, known, 10, 2)
	want := [][]string{{"TestA", "TestNew", "TestD"}, {"TestB", "TestC"}}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("got %v, want %v", plan, want)
	}
	if got := deal([]string{"TestA"}, nil, 10, 3); len(got[0]) != 1 || len(got[1])+len(got[2]) != 0 {
		t.Fatalf("one test goes to one shard: %v", got)
	}
}
