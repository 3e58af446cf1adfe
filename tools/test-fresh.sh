#!/usr/bin/env bash
# The README's first command on a machine with nothing installed: a minimal
# Debian bookworm (debootstrap --variant=minbase) in a scratch folder, a
# clean `git clone` of this checkout's HEAD in it, and the command run there
# under chroot. Passes when the command succeeds, prints the demo's summary
# and the benchmark table, and writes every figure the demo promises.
# With --and-tests, the README's second command then runs in the same
# system, as a new user would run it after the first (every test, from the
# state the first command left: its build directory goes on).
#
# The bootstrapped base system is cached as a tarball under
# /var/cache/attnpool (ATTNPOOL_FRESH_CACHE), so a second run costs the
# command's own minutes, not a bootstrap's. Needs root (chroot, mounts) and
# the package archive of /etc/apt; installs debootstrap when missing.
# usage: tools/test-fresh.sh [--and-tests] [scratch-dir]
#        (default scratch-dir /var/tmp/attnpool-fresh)
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$(pwd)
arguments=("$@")  # (as given, for sudo below)
and_tests=0
if [[ ${1:-} == --and-tests ]]; then
  and_tests=1
  shift
fi
scratch=${1:-/var/tmp/attnpool-fresh}
cache=${ATTNPOOL_FRESH_CACHE:-/var/cache/attnpool}/bookworm-minbase.tar.gz
root=$scratch/root
log=$scratch/command.log

if [[ $(id -u) -ne 0 ]]; then  # chroot and mounts need root
  command -v sudo >/dev/null && exec sudo "$0" "${arguments[@]}"
  echo "test-fresh: needs root (chroot and mounts)" >&2
  exit 2
fi

# The README's first command: the first line of the block after
# "## Two commands", without its comment.
command=$(awk '/^## Two commands/ {section = 1} section && /^```sh/ {getline;
  sub(/[ \t]*#.*/, ""); print; exit}' README.md)
# The second: the line after it.
second_command=$(awk '/^## Two commands/ {section = 1} section && /^```sh/ {getline;
  getline; sub(/[ \t]*#.*/, ""); print; exit}' README.md)
if [[ -z $command || -z $second_command ]]; then
  echo "test-fresh: no two commands found under '## Two commands' in README.md" >&2
  exit 2
fi

# The mirror this machine's apt uses (deb822 or one-line sources).
mirror=$(sed -n 's|^URIs: *\(http[^ ]*/debian\)/*$|\1|p' \
  /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
[[ -n $mirror ]] || mirror=$(sed -n 's|^deb  *\(http[^ ]*/debian\)/* .*|\1|p' \
  /etc/apt/sources.list 2>/dev/null | head -n 1)
[[ -n $mirror ]] || mirror=http://deb.debian.org/debian

wheel_root=$scratch/wheel-root
unmount_all() {  # root
  for point in "$1/dev/shm" "$1/dev/pts" "$1/dev" "$1/sys" "$1/proc"; do
    if mountpoint -q "$point" 2>/dev/null; then
      umount "$point" || umount -l "$point"
    fi
  done
}
cleanup() {
  for system in "$root" "$wheel_root"; do
    unmount_all "$system"
    rm -rf "$system"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup  # what an interrupted run left behind
mkdir -p "$scratch"

if [[ ! -s $cache ]]; then
  command -v debootstrap >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  echo "== bootstrapping Debian bookworm (minbase) from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$scratch/debootstrap.log" 2>&1 ||
    { tail -n 20 "$scratch/debootstrap.log"; exit 1; }
  mkdir -p "$(dirname "$cache")"
  tar -C "$root" -czf "$cache.partial" . && mv "$cache.partial" "$cache"
else
  echo "== Debian bookworm (minbase) from the cache $cache"
  mkdir -p "$root"
  tar -C "$root" -xzf "$cache"
fi

# A fresh system at `root` from the cache, with a clone of this checkout's
# HEAD in /work/attnpool, this machine's network, and the kernel's
# file systems mounted.
fresh_system() {  # root
  if [[ $1 != "$root" ]]; then
    mkdir -p "$1"
    tar -C "$1" -xzf "$cache"
  fi
  git clone --quiet --no-hardlinks "$source_dir" "$1/work/attnpool"
  # This machine's network as the fresh system's: its name servers and
  # host names, and the certificate authorities and pip settings it
  # trusts (an egress proxy's among them), so that pip reaches PyPI from
  # there as it does from here. (debootstrap writes no /etc/hosts, which
  # an installed Debian has: without it each MPI rank past the second
  # waited 5 s for its own host name.)
  cp /etc/resolv.conf "$1/etc/resolv.conf"
  if [[ -f /etc/hosts ]]; then cp /etc/hosts "$1/etc/hosts"; fi
  if [[ -d /usr/local/share/ca-certificates ]]; then
    mkdir -p "$1/usr/local/share"
    cp -r /usr/local/share/ca-certificates "$1/usr/local/share/"
  fi
  if [[ -s /etc/ssl/certs/ca-certificates.crt ]]; then
    mkdir -p "$1/etc/ssl/certs"
    cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"
  fi
  if [[ -f /etc/pip.conf ]]; then cp /etc/pip.conf "$1/etc/pip.conf"; fi
  mount -t proc proc "$1/proc"
  mount --bind /sys "$1/sys"
  mount --bind /dev "$1/dev"
  mount --bind /dev/pts "$1/dev/pts"
  # (Open MPI's shared-memory transport, in the tests)
  if mountpoint -q /dev/shm; then mount --bind /dev/shm "$1/dev/shm"; fi
}
in_system() {  # root, command: run in that system, its output on ours
  chroot "$1" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /work/attnpool && $2"
}
in_fresh_system() { in_system "$root" "$1"; }
fresh_system "$root"
echo "   checkout: $(git -C "$root/work/attnpool" log -1 --format='%h %s' | cut -c1-72)"

echo "== in the fresh system: $command"
start=$SECONDS
status=0
in_fresh_system "$command" >"$log" 2>&1 || status=$?
echo "   exit status $status after $((SECONDS - start)) s"
if [[ $status -ne 0 ]]; then
  tail -n 40 "$log"
  exit 1
fi

# What the main job promises: the demo's summary, its figures, the table.
failures=0
expect() {  # pattern, what it shows
  if ! grep -qE -- "$1" "$log"; then
    echo "   MISSING: $2 (no line matching '$1')"
    failures=$((failures + 1))
  fi
}
expect '^active target: ' "attnpool-info's active target"
expect '^seed case: 40 training points' "the demo's seed case"
expect '^large case: 2000 training points' "the demo's large case"
expect 'chosen h = ' "the leave-one-out choice"
expect '^target [A-Z0-9_]+ \(supported: ' "the target the demo ran on"
expect '^figures: [0-9]+ x \(PNG, SVG\) in ' "the demo's figures"
expect '^stage +variant +shape' "the distance benchmark's table"
figures=$(sed -n 's/^figures: \([0-9]*\) x (PNG, SVG) in \([^:]*\): \(.*\)$/\1|\2|\3/p' "$log")
count=${figures%%|*}
rest=${figures#*|}
directory=${rest%%|*}
names=${rest#*|}
found=0
for name in ${names//,/ }; do
  for extension in png svg; do
    file="$root/work/attnpool/$directory/$name.$extension"
    [[ $directory == /* ]] && file="$root$directory/$name.$extension"
    if [[ $extension == png ]]; then
      magic=$(head -c 8 "$file" 2>/dev/null | od -An -tx1 | tr -d ' \n')
      [[ $magic == 89504e470d0a1a0a ]] || { echo "   NOT A PNG: $file"; failures=$((failures + 1)); continue; }
    else
      grep -q '<svg' "$file" 2>/dev/null || { echo "   NOT AN SVG: $file"; failures=$((failures + 1)); continue; }
    fi
    found=$((found + 1))
  done
done
if [[ -z $count || $found -ne $((2 * count)) ]]; then
  echo "   figures: $found files found, the demo promised ${count:-?} x 2"
  failures=$((failures + 1))
fi
if [[ $failures -ne 0 ]]; then
  echo "== the output of '$command':"
  cat "$log"
  exit 1
fi
grep -E '^(active target|seed case|large case|target |figures)' "$log" | sed 's/^/   /'
echo "== fresh system: '$command' passed ($found figure files checked)"
if ((and_tests)); then
  echo "== in the same system: $second_command"
  start=$SECONDS
  in_fresh_system "$second_command" || {
    echo "== fresh system: '$second_command' failed after $((SECONDS - start)) s"
    exit 1
  }
  echo "== fresh system: '$second_command' passed in $((SECONDS - start)) s"
  # The wheel it built (tools/test-python.sh), in a second fresh system
  # with no compiler and no Highway: Debian's python3 in a venv, the wheel
  # and the tests' packages from PyPI, then `python -m attnpool` and the
  # Python tests.
  wheels=("$root"/work/attnpool/build/wheelhouse/attnpool-*.whl)
  wheel=${wheels[0]}
  [[ ${#wheels[@]} == 1 && -f $wheel ]] ||
    { echo "== fresh system: not one wheel in build/wheelhouse"; exit 1; }
  echo "== the wheel $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) in a fresh system without compilers"
  start=$SECONDS
  fresh_system "$wheel_root"
  cp "$wheel" "$wheel_root/work/"
  in_system "$wheel_root" "
    set -eo pipefail
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv >/dev/null
    for tool in cc c++ gcc g++ clang; do
      if command -v \$tool >/dev/null; then echo \"a compiler: \$tool\"; exit 1; fi
    done
    if ls /usr/lib/*/libhwy* >/dev/null 2>&1; then echo 'Highway is installed'; exit 1; fi
    python3 -m venv /opt/venv
    /opt/venv/bin/python -m pip install -q --upgrade pip >/dev/null
    wheel_start=\$SECONDS
    /opt/venv/bin/python -m pip install -q /work/$(basename "$wheel")
    echo \"   the wheel installed in \$((SECONDS - wheel_start)) s\"
    /opt/venv/bin/python -m pip install -q numpy pytest scikit-learn statsmodels matplotlib
    (cd / && /opt/venv/bin/python -m attnpool) | sed 's/^/   /'
    /opt/venv/bin/python -m pytest -q -p no:cacheprovider tests/python \
      >/tmp/pytest.log 2>&1 || { cat /tmp/pytest.log; exit 1; }
    tail -n 1 /tmp/pytest.log
  " || { echo "== the wheel failed after $((SECONDS - start)) s"; exit 1; }
  echo "== the wheel passed in $((SECONDS - start)) s"
fi
