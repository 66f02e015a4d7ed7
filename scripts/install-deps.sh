#!/usr/bin/env bash
# Install the Debian packages psched builds and tests with; skip what is
# there already.  Uses sudo when not root.  PSCHED_NO_INSTALL=1 only checks.
set -euo pipefail

# g++: nvcc's host compiler, for the CUDA parts when /usr/local/cuda is there.
pkgs=(gcc g++ make pkg-config libc6-dev
      libprotobuf-c-dev protobuf-c-compiler libgsl-dev
      libibverbs-dev librdmacm-dev
      iproute2 procps python3 python3-numpy python3-yaml gnuplot-nox
      openssh-server openssh-client
      python3-torch
      clang libclang-rt-14-dev)  # make fuzz: libFuzzer (tests/fuzz/)
# With arguments: install just those (tests that need heavy optional
# packages, e.g. Slurm, ask for them when they run).
if [ $# -gt 0 ]; then pkgs=("$@"); fi

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "${PSCHED_NO_INSTALL:-0}" = 1 ]; then
	echo "install-deps: missing Debian packages: ${missing[*]}" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
		exit 1
	fi
	sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq || echo "install-deps: apt-get update failed; trying the cached lists" >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
