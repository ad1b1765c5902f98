// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package metricfam

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestSums(t *testing.T) {
	text := `# TYPE c counter
c{plugin="A",result="narrowed"} 2
c{plugin="A",result="all_pods"} 3
c{plugin="B",result="narrowed"} 5
# TYPE h histogram
h_bucket{plugin="A",le="+Inf"} 4
h_sum{plugin="A"} 1
h_count{plugin="A"} 4
h_bucket{plugin="B",le="+Inf"} 6
h_sum{plugin="B"} 1
h_count{plugin="B"} 6
`
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		want map[string]string
		sum  float64
	}{
		{map[string]string{"plugin": "A", "result": "narrowed"}, 2},
		{map[string]string{"plugin": "A"}, 5},
		{map[string]string{"result": "narrowed"}, 7},
		{nil, 10},
		{map[string]string{"plugin": "C"}, 0},
	} {
		if got := CounterSum(fams, "c", tc.want); got != tc.sum {
			t.Errorf("CounterSum(%v) = %v, want %v", tc.want, got, tc.sum)
		}
	}
	if got := CounterSum(fams, "absent", nil); got != 0 {
		t.Errorf("an absent family sums to %v", got)
	}
	if got := HistogramCount(fams, "h", map[string]string{"plugin": "B"}); got != 6 {
		t.Errorf("HistogramCount = %d, want 6", got)
	}
}
