#!/usr/bin/env bash
# Installs the Debian 12 packages dpscope needs, only those missing; works as root or with sudo.
# Optional: DPSCOPE_WITH_TORCH=1 also installs python3-torch (the PyTorch 1.13 reference for parity tests).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libsimdjson-dev libopenblas-dev libzstd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libimgui-dev libglfw3-dev libstb-dev libgl-dev libgl1-mesa-dri fonts-dejavu-core
  libopenmpi-dev openmpi-bin
  xvfb xauth python3 python3-numpy
)
if [[ "${DPSCOPE_WITH_TORCH:-0}" == 1 ]]; then packages+=(python3-torch); fi

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
  command -v sudo >/dev/null || { echo "dpscope: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "dpscope: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
