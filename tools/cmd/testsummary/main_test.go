package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummarizeCountsAndKeepsOnlyFailingOutput(t *testing.T) {
	events := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"noise from a passing test\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"why B failed\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`# q: a build error printed by go test itself`,
	}, "\n")
	var out strings.Builder
	s, err := summarize(strings.NewReader(events), &out)
	require.NoError(t, err)
	assert.Equal(t, 1, s.passed)
	assert.Equal(t, 1, s.failed)
	assert.Equal(t, 1, s.skipped)
	assert.Equal(t, []string{"p.TestB"}, s.failedTests)
	assert.True(t, s.failedPackages["p"])
	assert.Contains(t, out.String(), "why B failed")
	assert.Contains(t, out.String(), "a build error")
	assert.NotContains(t, out.String(), "noise from a passing test")
}

func TestSlowestAreTopLevelTestsLongestFirst(t *testing.T) {
	events := strings.Join([]string{
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"pass","Package":"p","Test":"TestB/sub","Elapsed":9}`,
		`{"Action":"pass","Package":"p","Test":"TestB","Elapsed":9.2}`,
		`{"Action":"fail","Package":"q","Test":"TestC","Elapsed":3}`,
		`{"Action":"skip","Package":"q","Test":"TestD","Elapsed":20}`,
		`{"Action":"pass","Package":"q","Elapsed":14}`,
	}, "\n")
	s, err := summarize(strings.NewReader(events), &strings.Builder{})
	require.NoError(t, err)
	assert.Equal(t, []timed{{"p.TestB", 9.2}, {"q.TestC", 3}}, s.slowest(2))
	assert.Len(t, s.slowest(10), 3)
}
