package main

import (
	"math"
	"testing"
)

func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := []bucket{{0.1, 10}, {0.5, 10}, {1, 10}, {inf, 10}}
	for _, c := range []struct {
		name  string
		after []bucket
		q     float64
		want  float64
	}{
		{"nothing observed between the reads", before, 0.5, 0},
		{"the median in the first bucket, from 0", []bucket{{0.1, 20}, {0.5, 20}, {1, 20}, {inf, 20}}, 0.5, 0.05},
		{"halfway into the second bucket", []bucket{{0.1, 15}, {0.5, 25}, {1, 30}, {inf, 30}}, 0.5, 0.3},
		{"the p99 in the third", []bucket{{0.1, 15}, {0.5, 25}, {1, 30}, {inf, 30}}, 0.99, 0.5 + 0.5*(19.8-15)/5},
		{"in +Inf: the highest finite bound", []bucket{{0.1, 10}, {0.5, 10}, {1, 10}, {inf, 14}}, 0.5, 1},
	} {
		if got := bucketQuantile(before, c.after, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRise(t *testing.T) {
	for _, c := range []struct {
		peak, base uint64
		want       float64
	}{
		{110, 100, 10},
		{100, 100, 0},
		{90, 100, -10},
		{100, 0, 0}, // no sample before: no rise to speak of
	} {
		if got := rise(c.peak, c.base); got != c.want {
			t.Errorf("rise(%d, %d) = %v, want %v", c.peak, c.base, got, c.want)
		}
	}
}
