#!/usr/bin/env bash
# Installs the Debian 12 packages dpscope needs, only those missing; works as root or with sudo.
#   scripts/install-deps.sh            everything: the build, the test suite, MPI (scripts/test.sh)
#   scripts/install-deps.sh --lesson   only what the quick start builds and runs: the dpscope
#                                      command and dpscope-viz, drawn under Xvfb (scripts/run.sh)
#   --list                             print the packages instead of installing them
# apt's output goes to a log file (DPSCOPE_LOG_DIR, default out/logs), printed only when it fails,
# so a fresh machine shows one line instead of hundreds of unpacking lines.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=all
list=0
for arg in "$@"; do
  case "$arg" in
    --lesson) profile=lesson ;;
    --list) list=1 ;;  # print the profile's packages, one per line, and install nothing
    *) echo "dpscope: error: unknown option '$arg' (usage: scripts/install-deps.sh [--lesson] [--list])" >&2; exit 2 ;;
  esac
done

# What the quick start needs: the compiler and CMake, the libraries the dpscope command links,
# the viewer's (GLFW, OpenGL, Dear ImGui, stb), and Xvfb + Mesa to draw without a display.
packages=(
  build-essential cmake ninja-build pkg-config
  libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libsimdjson-dev libopenblas-dev libzstd-dev
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri fonts-dejavu-core
  xvfb xauth
)
# The rest: tests and benchmarks (GoogleTest, Google Benchmark), MPI ranks, numpy for the parity
# tests' fixtures, git for the scripts that compare builds, and PyTorch 1.13 (CPU, gloo): the
# reference of the parity tests and the real DDP runs dpscope_torch records (tests/python).
if [[ $profile == all ]]; then
  packages+=(git libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin python3 python3-numpy
    python3-torch)
fi

if ((list)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "dpscope: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "dpscope: error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
log_dir=${DPSCOPE_LOG_DIR:-out/logs}
mkdir -p "$log_dir"
log="$log_dir/install-deps.log"
started=$SECONDS
echo "dpscope: installing ${#missing[@]} packages: ${missing[*]} (apt's log: $log)"
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "dpscope: error: apt-get could not install the packages above (the whole log: $log)" >&2
  exit 1
fi
echo "dpscope: installed ${#missing[@]} packages in $((SECONDS - started)) s"
