// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// TestDockerfiles checks what can be checked of the images without a
// container engine: each runs as the user its manifest names, and builds
// for TARGETARCH on the builder's platform (amd64 and arm64 from one
// build).
func TestDockerfiles(t *testing.T) {
	objs := renderKustomization(t, manifestsRoot)
	agent := decodeObject[appsv1.DaemonSet](t, findObject(t, objs, "DaemonSet", "telesched-agent")).Spec.Template.Spec.SecurityContext
	scheduler := decodeObject[appsv1.Deployment](t, findObject(t, objs, "Deployment", "telesched-scheduler")).Spec.Template.Spec.SecurityContext
	descheduler := decodeObject[appsv1.Deployment](t, findObject(t, renderKustomization(t, filepath.Join(manifestsRoot, "descheduler")),
		"Deployment", "telesched-descheduler")).Spec.Template.Spec.SecurityContext
	for file, sc := range map[string][2]int64{
		"Dockerfile.agent":       {ptr.Deref(agent.RunAsUser, -1), ptr.Deref(agent.RunAsGroup, -1)},
		"Dockerfile.scheduler":   {ptr.Deref(scheduler.RunAsUser, -1), ptr.Deref(scheduler.RunAsGroup, -1)},
		"Dockerfile.descheduler": {ptr.Deref(descheduler.RunAsUser, -1), ptr.Deref(descheduler.RunAsGroup, -1)},
	} {
		data, err := os.ReadFile(filepath.Join(manifestsRoot, "..", file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		users := regexp.MustCompile(`(?m)^USER (\S+)$`).FindAllStringSubmatch(text, -1)
		if want := fmt.Sprintf("%d:%d", sc[0], sc[1]); len(users) != 1 || users[0][1] != want {
			t.Errorf("%s: USER %v, want %s, the user its manifest runs it as", file, users, want)
		}
		if !strings.Contains(text, "FROM --platform=$BUILDPLATFORM ") || !strings.Contains(text, "ARG TARGETARCH") || !strings.Contains(text, "GOARCH=${TARGETARCH}") {
			t.Errorf("%s: the build stage does not cross-compile for TARGETARCH on $BUILDPLATFORM", file)
		}
	}
}
