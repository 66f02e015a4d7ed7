#!/usr/bin/env bash
# Install the Debian packages psched builds and tests with; skip what is
# there already.  Uses sudo when not root.  PSCHED_NO_INSTALL=1 only checks.
#   install-deps.sh               what the build and most tests need
#   install-deps.sh --for GROUP   only a heavy optional group, installed by
#                                 the tests that need it, when they run:
#                                 torch (python3-torch, ~1 GB with deps:
#                                 test_train_torch.sh)
#   install-deps.sh PKG...        just these packages (slurm, openmpi-bin,
#                                 npm: the launcher tests ask for them)
# Another apt or dpkg running (unattended-upgrades, a colleague) is waited
# for, up to PSCHED_APT_LOCK_TIMEOUT seconds (600), instead of failing.
set -euo pipefail

# g++: nvcc's host compiler, for the CUDA parts when /usr/local/cuda is there.
# libcap2-bin: capsh (test_sender_nice.sh drops CAP_SYS_NICE with it).
pkgs=(gcc g++ make pkg-config libc6-dev dpkg-dev
      libprotobuf-c-dev protobuf-c-compiler libgsl-dev nettle-dev zlib1g-dev
      libibverbs-dev librdmacm-dev
      iproute2 procps libcap2-bin python3 python3-numpy python3-yaml gnuplot-nox
      openssh-server openssh-client
      clang libclang-rt-14-dev   # make fuzz: libFuzzer (tests/fuzz/)
      clang-format               # tests/static/test_format.sh
      prometheus)                # test_metrics.sh: prometheus, promtool
if [ "${1:-}" = --for ]; then
	case ${2:-} in
	torch) pkgs=(python3-torch) ;;
	*) echo "install-deps: --for takes torch, not '${2:-}'" >&2; exit 2 ;;
	esac
elif [ $# -gt 0 ]; then
	# With package names: install just those (tests that need heavy
	# optional packages, e.g. Slurm, ask for them when they run).
	pkgs=("$@")
fi

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
lock=(-o "DPkg::Lock::Timeout=${PSCHED_APT_LOCK_TIMEOUT:-600}")
$sudo apt-get "${lock[@]}" update -qq ||
	echo "install-deps: apt-get update failed; trying the cached lists" >&2
$sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
