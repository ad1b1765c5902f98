#!/usr/bin/env bash
# Copyright The telesched Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Generates the typed Go client of telemetry.telesched.io/v1alpha1 for
# integrators (and telesched's own tests) with Kubernetes' code generators,
# pinned in hack/tools: apply configurations, a clientset (with a fake),
# listers and informers, under apis/telemetry/client/. Every Go file there
# is generated (staticcheck.conf is not): run `make generate` after
# changing the types. Without OpenAPI models, the apply configurations have
# no Extract functions.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BIN:-$PWD/bin}
module=github.com/telesched/telesched
api=$module/apis/telemetry/v1alpha1
out=apis/telemetry/client
pkg=$module/$out
header=hack/boilerplate.go.txt

rm -rf "$out/applyconfiguration" "$out/clientset" "$out/listers" "$out/informers"
"$bin/applyconfiguration-gen" --go-header-file "$header" \
	--output-dir "$out/applyconfiguration" --output-pkg "$pkg/applyconfiguration" \
	"$api"
"$bin/client-gen" --go-header-file "$header" \
	--output-dir "$out/clientset" --output-pkg "$pkg/clientset" \
	--clientset-name versioned \
	--input-base "" --input "$api" \
	--apply-configuration-package "$pkg/applyconfiguration"
"$bin/lister-gen" --go-header-file "$header" \
	--output-dir "$out/listers" --output-pkg "$pkg/listers" \
	"$api"
"$bin/informer-gen" --go-header-file "$header" \
	--output-dir "$out/informers" --output-pkg "$pkg/informers" \
	--versioned-clientset-package "$pkg/clientset/versioned" \
	--listers-package "$pkg/listers" \
	"$api"
