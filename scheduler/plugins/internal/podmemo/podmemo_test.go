package podmemo

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMemo(t *testing.T) {
	m := New[int]()
	calls := 0
	f := func(p *v1.Pod) int { calls++; return len(p.Name) }
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "abc", UID: "u1", ResourceVersion: "1"}}
	for range 3 {
		if got := m.Get(p, f); got != 3 {
			t.Fatalf("Get = %d", got)
		}
	}
	if calls != 1 {
		t.Errorf("computed %d times for one version, want 1", calls)
	}
	p2 := p.DeepCopy()
	p2.ResourceVersion, p2.Name = "2", "abcd"
	if got := m.Get(p2, f); got != 4 || calls != 2 {
		t.Errorf("a new version: Get = %d after %d computations, want 4 after 2", got, calls)
	}
	anon := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	m.Get(anon, f)
	m.Get(anon, f)
	if calls != 4 {
		t.Errorf("a pod without a UID was remembered (%d computations, want 4)", calls)
	}
}
