#!/usr/bin/env bash
# Builds the real components the tests run beside pvguard into bin/, using only the Go module proxy:
#   - etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl, from the pinned
#     tools module (hack/tools/go.mod: one k8s.io/kubernetes version for all four Kubernetes
#     commands; the kubectl plugin's end-to-end test runs the real kubectl);
#   - the CSI external-provisioner and external-resizer, and external-snapshotter's
#     snapshot-controller and csi-snapshotter, at the versions in hack/tools/pins;
#   - promtool, Prometheus' rule checker, at the version in hack/tools/pins: the chart tests run
#     `promtool check rules` and `promtool test rules` on the rendered PrometheusRule and the
#     Grafana dashboard's queries (charts/monitoring_test.go).
# Each binary (etcd and kube-apiserver as one group) has a stamp of its pins beside it in bin/, so it
# is rebuilt only when its own pins change. Every run then checks that each binary starts and
# reports its pinned version (a fraction of a second), and fails naming the one that does not.
#
# Cold, with the Go modules downloaded and an empty build cache, the whole script takes about half
# an hour on two cores; etcd and kube-apiserver alone (`make demo`) about 5 minutes; a relink from
# a warm build cache, seconds. Kubernetes' own components share most packages; the CSI sidecars,
# external-snapshotter and promtool pin other k8s.io versions and share little.
#
# Arguments name the tools to build and check, and only those (`make demo` and `make dev` name
# etcd and kube-apiserver, all the local control plane runs): etcd and kube-apiserver are one
# group, so naming either builds both. With no argument, every tool is.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin"
tools="$root/hack/tools"

k8s_tools="kube-controller-manager kube-scheduler kubectl"
pin_tools=$(sed -n 's/^\([a-z][^[:space:]#]*\)[[:space:]].*/\1/p' "$tools/pins" | tr '\n' ' ')
known="etcd kube-apiserver $k8s_tools $pin_tools"
usage() { echo "usage: hack/build-tools.sh [TOOL...], TOOL one of: $known" >&2; exit 2; }
# selected[NAME] is set for each tool named; none named means all.
declare -A selected=()
for arg in "$@"; do
  case $arg in
    -*) usage ;;
    *)
      [[ " $known " == *" $arg "* ]] || { echo "build-tools: unknown tool $arg" >&2; usage; }
      selected[$arg]=1
      ;;
  esac
done
# wanted NAME: NAME was named, or nothing was (build everything).
wanted() { ((${#selected[@]} == 0)) || [[ -n ${selected[$1]:-} ]]; }
# The control plane is one group: either name selects both.
control_plane=
if wanted etcd || wanted kube-apiserver; then control_plane=1; fi

gomod_version() { sed -n "s|^\t$1 \(v[^ ]*\)\$|\1|p" "$tools/go.mod"; }
k8s_version=$(gomod_version k8s.io/kubernetes)
etcd_version=$(gomod_version go.etcd.io/etcd/server/v3)
[[ -n $k8s_version && -n $etcd_version ]] || { echo "build-tools: no k8s.io/kubernetes or etcd version in $tools/go.mod" >&2; exit 1; }
minor=$(echo "$k8s_version" | cut -d. -f2)
ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
# The control plane's stamp keeps its historical recipe (and file name), so existing checkouts do
# not rebuild it; the other Kubernetes components do not depend on the etcd entry point.
cp_want=$( (cat "$tools/go.mod" "$tools/go.sum" "$tools/etcd/main.go"; echo "$ldflags") | sha256sum | cut -d' ' -f1)
k8s_want=$( (cat "$tools/go.mod" "$tools/go.sum"; echo "$ldflags") | sha256sum | cut -d' ' -f1)

mkdir -p "$bin"
# fresh STAMP WANT BINARY...: every binary exists and the stamp records WANT.
fresh() {
  local stamp=$1 want=$2
  shift 2
  [[ -f $stamp && "$(cat "$stamp")" == "$want" ]] || return 1
  for b in "$@"; do [[ -x $bin/$b ]] || return 1; done
}
# since T0: seconds elapsed since T0 (from $SECONDS).
since() { echo "$((SECONDS - $1))s"; }

if [[ -n $control_plane ]] && ! fresh "$bin/.tools-stamp" "$cp_want" etcd kube-apiserver; then
  rm -f "$bin/.tools-stamp"
  echo "build-tools: building etcd $etcd_version and kube-apiserver $k8s_version into $bin (first time: many minutes)" >&2
  t0=$SECONDS
  (cd "$tools" && go build -o "$bin/etcd" ./etcd)
  echo "build-tools: etcd built in $(since "$t0")" >&2
  t0=$SECONDS
  (cd "$tools" && go build -ldflags "$ldflags" -o "$bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  echo "build-tools: kube-apiserver built in $(since "$t0")" >&2
  echo "$cp_want" > "$bin/.tools-stamp"
fi

for c in $k8s_tools; do
  wanted "$c" || continue
  fresh "$bin/.$c-stamp" "$k8s_want" "$c" && continue
  rm -f "$bin/.$c-stamp"
  echo "build-tools: building $c $k8s_version into $bin (first time: several minutes)" >&2
  t0=$SECONDS
  (cd "$tools" && go build -ldflags "$ldflags" -o "$bin/$c" "k8s.io/kubernetes/cmd/$c")
  echo "build-tools: $c built in $(since "$t0")" >&2
  echo "$k8s_want" > "$bin/.$c-stamp"
done

# The CSI sidecars. `go install M@V` refuses them: their go.mod files carry replace lines, which
# go install rejects outright. So `go mod download -json M@V` names the module's source directory
# in the (read-only) module cache, a writable scratch copy of it goes to bin/.build/, and its
# command is built there with the module's own go.mod and go.sum, as the sidecar's own release
# build does. At the pinned versions every replace line maps a k8s.io module to a version the
# proxy serves (external-provisioner v6.4.0: the k8s.io staging modules to v0.36.1;
# external-resizer v1.14.0: api, apimachinery, apiserver, client-go, component-base,
# csi-translation-lib and kms to v0.33.0), none to a local path, and the shipped go.sum is
# complete, so nothing needs rewriting and the build runs with -mod=readonly: exactly the
# dependency graph upstream released. A future pin with a replace to a local path is refused
# below rather than silently resolved. (The proxy here answers `go list -m -versions` for the
# resizer with 403, but serves v1.14.0 itself.) -trimpath lets worktrees share the build cache;
# -buildvcs=false keeps pvguard's git state (the copy lies inside this checkout) out of them;
# main.version is what the sidecars' own Makefiles set, and what --version prints.
# The pins are read on descriptor 3, so nothing the loop runs can swallow them from stdin.
# promtool (Prometheus' rule checker, which the chart tests run on the rendered PrometheusRule and
# the dashboard's queries) is built the same way; its pin's fifth column names the variable its
# version goes in, github.com/prometheus/common/version.Version, which `promtool --version` prints.
# A pin without that column keeps main.version and the stamp recipe it always had, so adding the
# column to the format rebuilt nothing.
sidecar_recipe='go build -trimpath -buildvcs=false -ldflags "-X main.version=$version"'

# repoint SRC MODULE@VERSION: SRC/go.mod replaces MODULE with a local directory the module zip
# does not hold (a nested module of the same repository, as external-snapshotter's client/v8 is);
# the replace is pointed at MODULE@VERSION on the proxy instead, and go.sum gets that version's
# two hashes as `go mod download` verified them (a local replace has none), so the build still
# runs with -mod=readonly. A pin naming a module go.mod does not replace locally is an error: the
# pin has gone stale.
repoint() {
  local src=$1 mv=$2 m=${2%@*} v=${2##*@} json sum modsum
  if ! grep -qE "^(replace)?[[:space:]]*${m//./\\.}([[:space:]]+v[^[:space:]]+)?[[:space:]]*=>[[:space:]]*(\.\.?)?/" "$src/go.mod"; then
    echo "build-tools: the pin rewrites a local replace of $m, but $src/go.mod has none" >&2
    return 1
  fi
  if ! json=$(cd / && GOWORK=off go mod download -json "$mv"); then
    echo "build-tools: go mod download $mv failed: $json" >&2
    return 1
  fi
  sum=$(sed -n 's/^\t"Sum": "\([^"]*\)".*/\1/p' <<<"$json")
  modsum=$(sed -n 's/^\t"GoModSum": "\([^"]*\)".*/\1/p' <<<"$json")
  [[ -n $sum && -n $modsum ]] || { echo "build-tools: go mod download $mv gave no hashes: $json" >&2; return 1; }
  (cd "$src" && GOWORK=off go mod edit -replace "$m=$mv")
  printf '%s %s %s\n%s %s/go.mod %s\n' "$m" "$v" "$sum" "$m" "$v" "$modsum" >> "$src/go.sum"
}

while read -r -u 3 name module version cmd replaces version_var; do
  [[ -z $name || $name == \#* ]] && continue
  wanted "$name" || continue
  [[ $replaces == - ]] && replaces=
  # The replaces and version-variable columns enter the stamp only when present, so the stamps of
  # pins without them keep their value.
  want=$( { printf '%s\n' "$module" "$version" "$cmd" "$sidecar_recipe"; [[ -z $replaces ]] || echo "$replaces"; [[ -z $version_var ]] || echo "$version_var"; } | sha256sum | cut -d' ' -f1)
  version_var=${version_var:-main.version}
  fresh "$bin/.$name-stamp" "$want" "$name" && continue
  rm -f "$bin/.$name-stamp"
  echo "build-tools: building $name $version ($module) into $bin (first time: a few minutes)" >&2
  t0=$SECONDS
  # Outside any module (and any go.work), so the download touches no go.mod or go.sum.
  if ! json=$(cd / && GOWORK=off go mod download -json "$module@$version"); then
    echo "build-tools: go mod download $module@$version failed: $json" >&2
    exit 1
  fi
  dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$json")
  [[ -n $dir && -f $dir/go.mod ]] || { echo "build-tools: go mod download $module@$version named no source directory: $json" >&2; exit 1; }
  src="$bin/.build/$name"
  rm -rf "$src"
  mkdir -p "$bin/.build"
  cp -R "$dir" "$src"
  chmod -R u+w "$src"
  for mv in ${replaces//,/ }; do repoint "$src" "$mv"; done
  # A local replacement is a path beginning with ./, ../ or /.
  if local_replace=$(grep -E '=>[[:space:]]*(\.\.?)?/' "$src/go.mod"); then
    echo "build-tools: $module@$version replaces a module with a local path, which its module zip does not hold:" >&2
    echo "$local_replace" >&2
    echo "build-tools: name the module@version the proxy serves for it in the pin's replaces column" >&2
    exit 1
  fi
  (cd "$src" && GOWORK=off go build -trimpath -buildvcs=false -ldflags "-X $version_var=$version" -o "$bin/$name" "./$cmd")
  rm -rf "$src"
  echo "build-tools: $name built in $(since "$t0")" >&2
  echo "$want" > "$bin/.$name-stamp"
done 3< "$tools/pins"
rmdir "$bin/.build" 2>/dev/null || true

# check NAME STAMP WANT [ARGS...]: bin/NAME ARGS (default --version) exits 0 and prints WANT. A
# binary that fails loses its stamp, so the next run rebuilds it.
check() {
  local name=$1 stamp=$2 want=$3 out rc=0
  shift 3
  (($#)) || set -- --version
  out=$("$bin/$name" "$@" 2>&1) || rc=$?
  if [[ $rc != 0 || $out != *"$want"* ]]; then
    echo "build-tools: $bin/$name $* exited $rc printing '$out', want '$want'; run hack/build-tools.sh again to rebuild it" >&2
    rm -f "$bin/$stamp"
    exit 1
  fi
}
if [[ -n $control_plane ]]; then
  check etcd .tools-stamp "etcd Version: ${etcd_version#v}"
  check kube-apiserver .tools-stamp "Kubernetes $k8s_version"
fi
for c in kube-controller-manager kube-scheduler; do
  if wanted "$c"; then check "$c" ".$c-stamp" "Kubernetes $k8s_version"; fi
done
# kubectl has no --version; --client keeps it from dialling a cluster.
if wanted kubectl; then check kubectl .kubectl-stamp "Client Version: $k8s_version" version --client; fi
while read -r -u 3 name module version cmd _; do
  [[ -z $name || $name == \#* ]] && continue
  wanted "$name" || continue
  check "$name" ".$name-stamp" " $version"
done 3< "$tools/pins"
