#!/usr/bin/env bash
# pitcrew's container image, built and tested without a container engine.
#
#   scripts/image.sh build   # `make image`: the Dockerfile, built by buildah
#   scripts/image.sh test    # `make image-test`: pitcrew's own checks run inside the image
#
# buildah (Debian's package; installed with apt-get when missing) builds with vfs
# storage and chroot isolation: no daemon, no overlay or user namespaces needed, so it
# runs as root on a CI machine or in a plain VM. The base is $PYTHON_IMAGE when given,
# else the Dockerfile's default pulled from its registry; where no registry answers, a
# Debian bookworm root with python3 is made with debootstrap from the mirror apt is
# configured with, kept as a tarball in $PITCREW_IMAGE_CACHE (default
# ~/.cache/pitcrew-image; deleting it only costs a minute on the next build) and imported
# as localhost/pitcrew-base. pip inside the build is given this machine's CA bundle, for
# networks that reach the package index through a TLS-inspecting proxy.
set -euo pipefail
shopt -s inherit_errexit nullglob
cd "$(dirname "$0")/.."

VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' bot/__init__.py)
IMAGE=${IMAGE:-localhost/pitcrew:$VERSION}
DEFAULT_BASE=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
CACHE=${PITCREW_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pitcrew-image}
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
buildah() { command buildah --storage-driver "$STORAGE_DRIVER" "$@"; }

say() { printf '== %s\n' "$*" >&2; }

need() {  # need COMMAND PACKAGE...: install Debian's packages when the command is missing
  local command=$1
  shift
  # type -P looks on PATH only: `command -v buildah` would find the buildah() wrapper above
  # and report buildah present where it is not.
  type -P "$command" >/dev/null && return
  say "installing $* (apt-get)"
  if [ "$(id -u)" != 0 ]; then
    echo "image.sh: $command is missing; install $* (as root)" >&2
    exit 2
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

mirror() {  # the Debian mirror apt uses for $SUITE, from /etc/apt/sources.list*
  local found files=()
  for found in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    /etc/apt/sources.list.d/*.sources; do
    [ -r "$found" ] && files+=("$found")
  done
  found=$(
    awk -v suite="$SUITE" '
      /^[[:space:]]*#/ { next }
      $1 == "deb" { url = ($2 ~ /^\[/) ? $3 : $2; s = ($2 ~ /^\[/) ? $4 : $3
                    if (s == suite) { print url; exit } }
      tolower($1) == "uris:" { uris = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) { print uris; exit } }
      /^[[:space:]]*$/ { uris = "" }
    ' "${files[@]}" /dev/null | head -n 1
  )
  if [ -z "$found" ]; then
    echo "image.sh: apt has no '$SUITE' source to make the base from; set PYTHON_IMAGE" >&2
    exit 2
  fi
  echo "$found"
}

debootstrap_base() {  # prints the name of the local base image, making it if needed
  local url key tarball name root
  url=$(mirror)
  key=$(printf '%s\n' "$url" "$SUITE" "$BASE_PACKAGES" "$(declare -f trim_root)" |
    sha256sum | cut -c1-12)
  name=localhost/pitcrew-base:$SUITE-$key
  if buildah inspect --type image "$name" >/dev/null 2>&1; then echo "$name"; return; fi
  tarball=$CACHE/$SUITE-python3-$key.tar
  if [ ! -s "$tarball" ]; then
    need debootstrap debootstrap debian-archive-keyring
    root=$(mktemp -d /tmp/pitcrew-base-XXXXXX)
    say "debootstrap $SUITE + python3 from $url into $root"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$root" "$url" \
      >"$root.log" 2>&1 || { tail -n 20 "$root.log" >&2; exit 1; }
    trim_root "$root"
    mkdir -p "$CACHE"
    tar --numeric-owner --one-file-system --exclude=./dev/* --exclude=./proc/* \
      --exclude=./sys/* -C "$root" -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
    rm -rf --one-file-system "$root" "$root.log"
  fi
  say "importing $tarball as $name"
  local ctr
  ctr=$(buildah from scratch)
  buildah add --quiet "$ctr" "$tarball" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd /bin/bash "$ctr"
  buildah commit --quiet --rm "$ctr" "$name" >/dev/null
  echo "$name"
}

trim_root() {  # what an image never uses: downloaded packages, apt lists, docs, man pages
  rm -rf --one-file-system "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* \
    "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/usr/share/locale/* \
    "$1"/var/log/*.log "$1"/tmp/*
}

base_image() {
  if [ -n "${PYTHON_IMAGE:-}" ]; then echo "$PYTHON_IMAGE"; return; fi
  if timeout 120 buildah --storage-driver "$STORAGE_DRIVER" pull --quiet "$DEFAULT_BASE" \
    >/dev/null 2>&1; then
    echo "$DEFAULT_BASE"
    return
  fi
  say "no registry answers for $DEFAULT_BASE: the base is made with debootstrap"
  debootstrap_base
}

build() {
  need buildah buildah
  local base start previous current ca_args=()
  start=$(date +%s)
  base=$(base_image)
  if [ -s "$CA_BUNDLE" ]; then
    ca_args=(--volume "$CA_BUNDLE:$CA_BUNDLE:ro" --build-arg "PIP_CERT=$CA_BUNDLE")
  fi
  say "building $IMAGE from $base"
  previous=$(buildah inspect --type image --format '{{.FromImageID}}' "$IMAGE" 2>/dev/null || true)
  buildah bud --isolation chroot --layers=false --pull-never --build-arg "PYTHON_IMAGE=$base" \
    "${ca_args[@]}" --tag "$IMAGE" --file Dockerfile .
  current=$(buildah inspect --type image --format '{{.FromImageID}}' "$IMAGE")
  if [ -n "$previous" ] && [ "$previous" != "$current" ]; then  # the one it replaced
    buildah rmi "$previous" >/dev/null 2>&1 || true
  fi
  say "built $IMAGE in $(($(date +%s) - start))s; $(size)"
}

size() {  # the image's size: the bytes of its root file system
  local ctr root bytes
  ctr=$(buildah from --pull-never "$IMAGE")
  root=$(buildah mount "$ctr")
  bytes=$(du -sb "$root" | cut -f1)
  buildah umount "$ctr" >/dev/null
  buildah rm "$ctr" >/dev/null
  echo "size $((bytes / 1000000)) MB ($(numfmt --to=iec "$bytes"))"
}


# -- make image-test --------------------------------------------------------------------

USER_ID=10001
PASSED=0
FAILED=0

check() {  # check NAME EXPECT-EXIT PATTERN -- COMMAND...: run it in the image, judge it
  local name=$1 want=$2 pattern=$3 out code=0
  shift 4
  out=$(buildah run "${RUN_ARGS[@]}" "$CTR" -- "$@" 2>&1) || code=$?
  if [ "$code" = "$want" ] && grep -Eq -- "$pattern" <<<"$out"; then
    PASSED=$((PASSED + 1))
    printf 'ok   %s\n' "$name"
  else
    FAILED=$((FAILED + 1))
    printf 'FAIL %s (exit %s, wanted %s and /%s/)\n' "$name" "$code" "$want" "$pattern"
  fi
  # (buildah's own lines about the exit status are left out: the status is shown above)
  grep -Ev '^(subprocess exited with status|Error: exit status) [0-9]+$' <<<"$out" |
    sed -n "1,${SHOW_LINES:-6}s/^/     | /p"
}

mount_args() {  # the root read-only: each real top-level directory bound onto itself, ro
  local root=$1 dir
  RUN_ARGS=(--isolation chroot --user "$USER_ID:$USER_ID" --env HOME=/var/lib/pitcrew)
  for dir in "$root"/*; do
    [ -d "$dir" ] && [ ! -L "$dir" ] || continue
    case ${dir##*/} in dev | proc | sys | tmp | run) continue ;; esac
    RUN_ARGS+=(--volume "$dir:/${dir##*/}:ro")
  done
  # What the chart mounts writable (persistence, the pattern cache, /tmp), and the inputs.
  RUN_ARGS+=(--volume "$SCRATCH/state:/var/lib/pitcrew" --volume "$SCRATCH/cache:/var/cache/pitcrew"
    --volume "$SCRATCH/tmp:/tmp" --volume "$PWD/examples/seed:/seed:ro"
    --volume "$SCRATCH/config:/config:ro")
}

write_config() {  # a daemon config with a Ray dashboard source and executor: no Ray SDK needed
  mkdir -p "$SCRATCH/config"
  cat >"$SCRATCH/config/pitcrew.yaml" <<'YAML'
store: {path: /var/lib/pitcrew/pitcrew.db}
chat: {kind: console}
sources:
  ray:
    - {name: train, address: "http://ray-head.ml-train.svc:8265"}
actions:
  executors: {"ray.*": ray}
YAML
}

seed_answer() {  # the primary category the source tree gives the seed case (if it has a venv)
  if [ -x .venv/bin/pitcrew ]; then
    .venv/bin/pitcrew diagnose --format json examples/seed |
      .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["primary"])'
  else
    echo '[a-z_]+'
  fi
}

image_test() {
  need buildah buildah
  if ! buildah inspect --type image "$IMAGE" >/dev/null 2>&1; then
    echo "image.sh: no image $IMAGE here; run \`make image\` first" >&2
    exit 2
  fi
  SCRATCH=$(mktemp -d /tmp/pitcrew-image-test-XXXXXX)
  CTR=$(buildah from --pull-never "$IMAGE")
  trap 'buildah umount "$CTR" >/dev/null 2>&1; buildah rm "$CTR" >/dev/null 2>&1; rm -rf "$SCRATCH"' EXIT
  mkdir -p "$SCRATCH"/{state,cache,tmp}
  chown "$USER_ID:$USER_ID" "$SCRATCH"/{state,cache,tmp}
  write_config
  mount_args "$(buildah mount "$CTR")"
  local primary
  primary=$(seed_answer)
  say "testing $IMAGE as uid $USER_ID with a read-only root"
  check "runs as the chart's user" 0 "^$USER_ID$" -- id -u
  check "the root is read-only" 1 "Read-only file system" -- touch /opt/pitcrew/x
  check "pitcrew version" 0 "^$VERSION$" -- pitcrew version
  check "pitcrew diagnose of the seed files" 0 "ROOT CAUSE: $primary" -- pitcrew diagnose /seed
  check "diagnose again, from the pattern cache" 0 "\"primary\": \"$primary\"" -- \
    sh -c 'ls /var/cache/pitcrew | grep -q "^library-" && pitcrew diagnose -f json /seed |
      python -m json.tool'
  check "pitcrew config check (built-in defaults)" 0 "built-in defaults\): OK" -- \
    pitcrew config check
  check "pitcrew config check (a Ray source, no Ray SDK)" 0 "pitcrew.yaml: OK" -- \
    pitcrew config check /config/pitcrew.yaml
  SHOW_LINES=2 check "pitcrew playbooks test" 0 " passed, 0 failed" -- pitcrew playbooks test
  check "Ray is not in the image" 1 "No module named 'ray'" -- python -c "import ray"
  check "pitcrew demo names the extra it needs" 2 "pip install 'pitcrew\[demo\]'" -- \
    pitcrew demo --yes
  echo "image-test: $PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ]
}

case "${1:-}" in
  build) build ;;
  test) image_test ;;
  size) need buildah buildah; size ;;
  *) echo "usage: scripts/image.sh build|test|size" >&2; exit 2 ;;
esac
