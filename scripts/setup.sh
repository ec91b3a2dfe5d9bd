#!/usr/bin/env bash
# Installs the Debian packages flashlab builds against. Idempotent: packages
# already present are left alone and apt is not touched at all when nothing
# is missing. Run as root (CI and the developer machines are root) or with sudo.
set -euo pipefail

packages=(
  build-essential cmake pkg-config      # toolchain
  libeigen3-dev                         # reference/ and tiled_cpu/ products
  libcli11-dev                          # the flashlab command line
  doctest-dev                           # tests/
  nlohmann-json3-dev                    # presets, reports, traces
  libbenchmark-dev                      # bench/
  libglfw3-dev libimgui-dev libstb-dev  # visualizer/
  libgl-dev libgl1-mesa-dri xvfb xauth  # visualizer tests under Xvfb + Mesa
  python3-numpy python3-pytest          # python/ (the flashlab package) and its tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
