#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# One command from a fresh Debian 12 machine to compressed swap:
# install what is needed, build, mount zswapfs with its built-in defaults,
# attach the swap file through a loop device with direct I/O, mkswap,
# swapon --discard (zswapctl swapon), and print the stats.
#
#   sudo contrib/quickstart.sh [MOUNTPOINT]        (default /run/zswapfs)
#   sudo contrib/quickstart.sh --down [MOUNTPOINT] (swapoff, detach, unmount)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = "--down" ]; then
	mnt=${2:-/run/zswapfs}
	"$top/build/src/zswapctl" swapoff "$mnt" || true
	umount "$mnt"
	echo "zswapfs at $mnt stopped"
	exit 0
fi

mnt=${1:-/run/zswapfs}
[ "$(id -u)" = 0 ] || { echo "quickstart: run as root" >&2; exit 1; }
if grep -q " $mnt fuse.zswapfs " /proc/mounts; then
	echo "quickstart: zswapfs is already mounted at $mnt" >&2
	exit 1
fi

"$top/contrib/deps.sh" >/dev/null
cd "$top"
[ -x configure ] || autoreconf -fi
# Out of tree, in build/, as contrib/run-tests.sh does.
mkdir -p build
(cd build && { [ -f Makefile ] || ../configure; } && make -j"$(nproc)")

mkdir -p "$mnt"
"$top/build/src/zswapfs" zswapfs "$mnt"	# detaches once the mount is ready
# losetup --direct-io=on, mkswap, swapon --discard
dev=$("$top/build/src/zswapctl" swapon "$mnt")
echo "zswapfs: $mnt/swap on $dev is swap now"
swapon --show
"$top/build/src/zswapctl" status
cat "$mnt/stats"
