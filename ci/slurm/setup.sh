#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine (Debian 12, as root, no systemd):
# munged, slurmctld and slurmd as plain daemons, logs under /var/log/slurm.
# Idempotent: run it again and it reuses what is installed and running.
# Exits non-zero, printing the daemons' logs, when the cluster does not come up.
#
# Environment: REPRO_SLURM_GPUS (fake GPU count for the node, default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gpus="${REPRO_SLURM_GPUS:-2}"
log_dir=/var/log/slurm

say() { printf 'slurm-setup: %s\n' "$*"; }

dump_logs() {
    for f in /var/log/munge/munged.log "$log_dir/slurmctld.log" "$log_dir/slurmd.log"; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 60 lines) =====\n' "$f"
            tail -n 60 "$f"
        fi
    done
}

fail() {
    printf 'slurm-setup: FAILED: %s\n' "$*" >&2
    dump_logs >&2
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    fail "must run as root (it installs packages and starts daemons)"
fi

# --- packages -------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm munge >/dev/null
fi

# --- munge ----------------------------------------------------------------------------
mkdir -p /etc/munge /var/log/munge /var/lib/munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    say "creating the munge key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown -R munge:munge /etc/munge /var/log/munge /var/lib/munge /run/munge
chmod 0700 /etc/munge /var/log/munge /var/lib/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key

if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "starting munged"
    # A stale pid or socket file from a killed munged blocks a new one.
    rm -f /run/munge/munged.pid /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
    for _ in $(seq 1 20); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.5
    done
    munge -n </dev/null | unmunge >/dev/null || fail "munge cannot encode and decode a credential"
fi

# --- slurm.conf -----------------------------------------------------------------------
host="$(hostname -s)"
hw="$(slurmd -C | head -n 1)"
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$hw"; }
cpus="$(field CPUs)"
boards="$(field Boards)"
sockets="$(field SocketsPerBoard)"
cores="$(field CoresPerSocket)"
threads="$(field ThreadsPerCore)"
memory="$(field RealMemory)"
[ -n "$cpus" ] && [ -n "$memory" ] || fail "could not read this node's hardware from 'slurmd -C': $hw"

# Placeholder device files for the fake GPUs (see gres.conf.in).
fake_dev_dir=/var/lib/repro-slurm
mkdir -p "$fake_dev_dir"
for i in $(seq 0 $((gpus - 1))); do touch "$fake_dev_dir/fake-gpu$i"; done
gpu_files="$fake_dev_dir/fake-gpu[0-$((gpus - 1))]"

fill() {
    sed -e "s/@HOSTNAME@/$host/g" -e "s/@CPUS@/$cpus/g" -e "s/@BOARDS@/$boards/g" \
        -e "s/@SOCKETS@/$sockets/g" -e "s/@CORES@/$cores/g" -e "s/@THREADS@/$threads/g" \
        -e "s/@MEMORY@/$memory/g" -e "s/@GPUS@/$gpus/g" -e "s|@GPU_FILES@|$gpu_files|g" "$1"
}
mkdir -p /etc/slurm
new_conf="$(fill "$here/slurm.conf.in")"
new_gres="$(fill "$here/gres.conf.in")"
conf_changed=0
if [ "$new_conf" != "$(cat /etc/slurm/slurm.conf 2>/dev/null)" ] \
    || [ "$new_gres" != "$(cat /etc/slurm/gres.conf 2>/dev/null)" ]; then
    say "writing /etc/slurm/slurm.conf and gres.conf for node $host ($cpus CPUs, ${memory} MB, $gpus fake GPUs)"
    printf '%s\n' "$new_conf" >/etc/slurm/slurm.conf
    printf '%s\n' "$new_gres" >/etc/slurm/gres.conf
    conf_changed=1
fi

mkdir -p "$log_dir" /var/spool/slurmctld /var/spool/slurmd /run/slurm
chown slurm:slurm "$log_dir" /var/spool/slurmctld /run/slurm
touch "$log_dir/jobcomp.log"
chown slurm:slurm "$log_dir/jobcomp.log"

# --- daemons --------------------------------------------------------------------------
running() { pgrep -x "$1" >/dev/null; }

stop_daemon() {
    local name="$1" pid
    pid="$(pgrep -x "$name" || true)"
    [ -n "$pid" ] || return 0
    say "stopping $name ($pid) to load the new configuration"
    kill $pid
    for _ in $(seq 1 20); do running "$name" || return 0; sleep 0.5; done
    kill -9 $pid 2>/dev/null || true
}

if [ "$conf_changed" = 1 ]; then
    stop_daemon slurmd
    stop_daemon slurmctld
fi

if ! running slurmctld; then
    say "starting slurmctld"
    # -i: ignore state files from an earlier configuration; runs as SlurmUser, daemonized.
    /usr/sbin/slurmctld -i || fail "slurmctld did not start"
fi
for _ in $(seq 1 30); do
    scontrol ping 2>/dev/null | grep -q 'is UP' && break
    sleep 1
done
scontrol ping | grep -q 'is UP' || fail "slurmctld does not answer 'scontrol ping'"

if ! running slurmd; then
    say "starting slurmd"
    /usr/sbin/slurmd || fail "slurmd did not start"
fi

# --- wait for the node ----------------------------------------------------------------
state=""
for _ in $(seq 1 60); do
    state="$(sinfo -h -n "$host" -o '%t' 2>/dev/null | head -n 1)"
    case "$state" in
        idle|mix|alloc) break ;;
        down*|drain*|fail*) scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
    esac
    sleep 1
done
case "$state" in
    idle|mix|alloc) ;;
    *) sinfo -N -l >&2 || true; fail "node $host is '$state', not idle, after 60 s" ;;
esac

out="$(timeout 60 srun -N1 -p debug -t 1 hostname 2>&1)" \
    || fail "'srun -N1 hostname' failed: $out"
[ "$out" = "$host" ] || [ "$out" = "$(hostname)" ] \
    || fail "'srun -N1 hostname' printed '$out', expected '$host'"

say "cluster up: partition debug, node $host ($cpus CPUs, $gpus fake GPUs); srun works"
sinfo -o '%P %a %l %D %t %N %G'
