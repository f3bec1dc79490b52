#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck source-path=SCRIPTDIR
#
# lib.sh's choice of a memory cgroup (zs_memcg_find, make_cgroup,
# require_memory_cgroup), against fake /proc/self/mounts, /proc/self/cgroup
# and cgroup trees, so that every case is tested on any machine: cgroup v1;
# v2 with memory enabled at the root; v2 where the test must enable it;
# v2 where the root refuses and a delegated subtree is used; v2 without the
# controller; no cgroups at all.  (The real machine's choice is what
# swap_cgroup.sh and writeback.sh log and use.)  A fake tree is plain files:
# what the kernel does on a write (create memory.* files in a new cgroup,
# turn "+memory" into "memory") is not there, so the test checks what lib.sh
# writes, not what the kernel makes of it.
set -eu
. "$(dirname "$0")/lib.sh"
make_tmpdir

T=$ZS_TMP

# fake_mounts NAME LINE...: a mounts file, one LINE a mount.
fake_mounts() {
	local f=$T/$1.mounts
	shift
	printf '%s\n' "proc /proc proc rw 0 0" "$@" >"$f"
	echo "$f"
}

# expect_found VERSION PARENT: zs_memcg_find picks VERSION and PARENT.
expect_found() {
	zs_memcg_find || fail "$what: nothing found: $ZS_CG_WHY"
	[ "$ZS_CG_VERSION" = "$1" ] || fail "$what: found v$ZS_CG_VERSION, expected v$1"
	[ "$ZS_CG_PARENT" = "$2" ] || fail "$what: parent $ZS_CG_PARENT, expected $2"
}

# expect_none WORDS: zs_memcg_find finds nothing and says WORDS.
expect_none() {
	if zs_memcg_find; then
		fail "$what: found v$ZS_CG_VERSION at $ZS_CG_PARENT, expected none"
	fi
	case $ZS_CG_WHY in
	*"$1"*) ;;
	*) fail "$what: the reason does not say '$1': $ZS_CG_WHY" ;;
	esac
	# and a test that needs a cgroup skips with that reason
	local rc=0
	(require_memory_cgroup) 2>"$T/skip.err" || rc=$?
	[ "$rc" -eq 77 ] || fail "$what: require_memory_cgroup exited $rc, not 77 (skip)"
	grep -qF "$1" "$T/skip.err" || fail "$what: the skip does not say why: $(cat "$T/skip.err")"
}

# fake_make_cgroup: make_cgroup 96M in the fake tree; sets CG.  Its clean-up
# (kill the processes, rmdir) is for real cgroups: the test removes the
# fake one itself.
fake_make_cgroup() {
	make_cgroup 96M
	CG=$ZS_CG
	drop_undo _zs_cg_remove "$CG"
	[ -d "$CG" ] || fail "$what: make_cgroup made no directory"
	[ "${CG%/*}" = "$ZS_CG_PARENT" ] || fail "$what: $CG is not in $ZS_CG_PARENT"
}

# content FILE: what FILE holds (cgroup files are read, never tested with -s)
content() { cat "$1" 2>/dev/null || echo "<missing>"; }

mkdir -p "$T/cg2" "$T/v1mem"
echo "" >"$T/v1mem/memory.limit_in_bytes"

# ---- v1: the memory controller's own mount, even beside a cgroup2 one -------------
what="v1"
ZS_PROC_MOUNTS=$(fake_mounts v1 "cgroup $T/cpu cgroup rw,cpu 0 0" \
	"cgroup $T/v1mem cgroup rw,nosuid,relatime,memory 0 0" "cgroup2 $T/cg2 cgroup2 rw 0 0")
expect_found 1 "$T/v1mem"
fake_make_cgroup
[ "$(content "$CG/memory.limit_in_bytes")" = 96M ] || fail "$what: memory.limit_in_bytes not set"
[ ! -e "$CG/memory.max" ] || fail "$what: memory.max written in a v1 cgroup"
run_in_cgroup "$CG" true || fail "$what: run_in_cgroup failed"
[ -n "$(content "$CG/cgroup.procs")" ] || fail "$what: run_in_cgroup did not join the cgroup"
rm -rf "$CG"
log "ok: $what"

# a v1 mount of other controllers only is no memory cgroup
what="v1 without memory"
ZS_PROC_MOUNTS=$(fake_mounts v1cpu "cgroup $T/cpu cgroup rw,cpu,cpuacct 0 0")
expect_none "no cgroup v1 memory controller and no cgroup2 mount"
log "ok: $what"

# ---- v2: memory already enabled for the root's children ---------------------------
what="v2, enabled at the root"
echo "cpuset cpu io memory hugetlb pids rdma misc" >"$T/cg2/cgroup.controllers"
echo "cpu io memory pids" >"$T/cg2/cgroup.subtree_control"
ZS_PROC_MOUNTS=$(fake_mounts v2 "cgroup2 $T/cg2 cgroup2 rw,nosuid,nodev,noexec 0 0")
expect_found 2 "$T/cg2"
fake_make_cgroup
[ "$(content "$CG/memory.max")" = 96M ] || fail "$what: memory.max is $(content "$CG/memory.max")"
for f in memory.high memory.limit_in_bytes memory.swap.max memory.zswap.max; do
	# the kernel makes swap.max and zswap.max; lib.sh only writes them
	[ ! -e "$CG/$f" ] || fail "$what: $f written"
done
run_in_cgroup "$CG" true || fail "$what: run_in_cgroup failed"
[ -n "$(content "$CG/cgroup.procs")" ] || fail "$what: run_in_cgroup did not join the cgroup"
rm -rf "$CG"
log "ok: $what"

# ---- v2: memory available, not yet enabled: the test enables it -------------------
what="v2, enabled by the test"
echo "cpu pids" >"$T/cg2/cgroup.subtree_control"
expect_found 2 "$T/cg2"
[ "$(content "$T/cg2/cgroup.subtree_control")" = +memory ] ||
	fail "$what: cgroup.subtree_control holds '$(content "$T/cg2/cgroup.subtree_control")'"
# and it is put back at exit, when no other cgroup is under the root
grep -qF "_zs_cg2_disable $T/cg2" <(printf '%s\n' "${_zs_undo[@]}") ||
	fail "$what: no clean-up registered for the enabled controller"
mkdir "$T/cg2/other"
_zs_cg2_disable "$T/cg2" 2>/dev/null
[ "$(content "$T/cg2/cgroup.subtree_control")" = +memory ] ||
	fail "$what: disabled memory with another cgroup under the root"
rmdir "$T/cg2/other"
_zs_cg2_disable "$T/cg2"
[ "$(content "$T/cg2/cgroup.subtree_control")" = -memory ] ||
	fail "$what: the clean-up did not write -memory"
drop_undo _zs_cg2_disable "$T/cg2"
log "ok: $what"

# ---- v2: the root refuses; a delegated subtree above our cgroup has it ------------
what="v2, delegated subtree"
# a write the kernel refuses (EBUSY: a namespace root with processes): the
# file is a directory here, so the write fails even for root
rm "$T/cg2/cgroup.subtree_control"
mkdir "$T/cg2/cgroup.subtree_control"
mkdir -p "$T/cg2/user.slice/user@0.service/app.slice/test.scope"
echo "memory pids" >"$T/cg2/user.slice/cgroup.subtree_control"
echo "memory pids" >"$T/cg2/user.slice/user@0.service/cgroup.subtree_control"
echo "pids" >"$T/cg2/user.slice/user@0.service/app.slice/cgroup.subtree_control"
echo "" >"$T/cg2/user.slice/user@0.service/app.slice/test.scope/cgroup.subtree_control"
printf '0::/user.slice/user@0.service/app.slice/test.scope\n' >"$T/own.cgroup"
ZS_PROC_CGROUP=$T/own.cgroup
# the nearest one that enables memory, not the root nor app.slice
expect_found 2 "$T/cg2/user.slice/user@0.service"
fake_make_cgroup
[ "$(content "$CG/memory.max")" = 96M ] || fail "$what: memory.max is $(content "$CG/memory.max")"
rm -rf "$CG"
# a v1-style line of /proc/self/cgroup is not our v2 cgroup
printf '12:memory:/elsewhere\n0::/user.slice/user@0.service/app.slice/test.scope\n' \
	>"$T/own.cgroup"
expect_found 2 "$T/cg2/user.slice/user@0.service"
log "ok: $what"

what="v2, refused and nothing delegated"
echo "pids" >"$T/cg2/user.slice/cgroup.subtree_control"
echo "pids" >"$T/cg2/user.slice/user@0.service/cgroup.subtree_control"
expect_none "cannot be enabled for children of the root"
printf '0::/\n' >"$T/own.cgroup"
expect_none "cannot be enabled for children of the root"
log "ok: $what"

# ---- v2 without the memory controller (bound to v1, or not built) ---------------
what="v2 without memory"
echo "cpu io pids" >"$T/cg2/cgroup.controllers"
expect_none "has no memory controller"
log "ok: $what"

# ---- no cgroups ---------------------------------------------------------------
what="no cgroups"
ZS_PROC_MOUNTS=$(fake_mounts none "tmpfs /tmp tmpfs rw 0 0")
expect_none "no cgroup v1 memory controller and no cgroup2 mount"
log "ok: $what"
exit 0
