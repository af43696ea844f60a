#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver and etcd) into bin/ from the pinned tools module
# (hack/tools/go.mod), using only the Go module proxy. A stamp of the pins is kept beside the
# binaries, so they are rebuilt only when the pinned versions change. A cold build takes about
# ten minutes on two cores.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin"
tools="$root/hack/tools"
stamp="$bin/.tools-stamp"

k8s_version=$(sed -n 's/^\tk8s.io\/kubernetes \(v[^ ]*\)$/\1/p' "$tools/go.mod")
[[ -n $k8s_version ]] || { echo "build-tools: no k8s.io/kubernetes version in $tools/go.mod" >&2; exit 1; }
minor=$(echo "$k8s_version" | cut -d. -f2)
ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
want=$( (cat "$tools/go.mod" "$tools/go.sum" "$tools/etcd/main.go"; echo "$ldflags") | sha256sum | cut -d' ' -f1)

# With --with-controller-manager, also kube-controller-manager (for the binder benchmark against
# the upstream persistentvolume-binder), under its own stamp.
if [[ ${1:-} == --with-controller-manager ]]; then
  kcm_stamp="$bin/.kcm-stamp"
  if ! [[ -x $bin/kube-controller-manager && -f $kcm_stamp && "$(cat "$kcm_stamp")" == "$want" ]]; then
    mkdir -p "$bin"
    echo "build-tools: building kube-controller-manager $k8s_version into $bin (first time: several minutes)" >&2
    (cd "$tools" && go build -ldflags "$ldflags" -o "$bin/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager)
    echo "$want" > "$kcm_stamp"
  fi
fi

if [[ -x $bin/kube-apiserver && -x $bin/etcd && -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
mkdir -p "$bin"
rm -f "$stamp"
echo "build-tools: building etcd and kube-apiserver $k8s_version into $bin (first time: ~10 minutes)" >&2
start=$(date +%s)
cd "$tools"
go build -o "$bin/etcd" ./etcd
go build -ldflags "$ldflags" -o "$bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "$want" > "$stamp"
echo "build-tools: done in $(( $(date +%s) - start ))s" >&2
