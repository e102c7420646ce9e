#!/usr/bin/env bash
# Start a one-node SLURM cluster on this machine (CI): munge, slurmctld and slurmd on
# localhost, one partition `debug` with all of this machine's CPUs and memory.
# Needs the Debian packages slurmctld slurmd slurm-client munge, and root.
# Idempotent: a running cluster is left as it is. Stop it with `scontrol shutdown`.
set -euo pipefail

if scontrol ping 2>/dev/null | grep -q "is UP"; then
    echo "slurm: already up"
    exit 0
fi

host=$(hostname -s)
# slurmd -C prints this machine as a NodeName line (CPUs, sockets, cores, RealMemory).
node=$(slurmd -C | head -n 1)

# munge authenticates the daemons and commands to each other; the key comes with the package.
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --force 2>/dev/null || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! pgrep -u munge -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged
fi

mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat >/etc/slurm/slurm.conf <<CONF
# Written by scripts/ci/start_slurm.sh: a single-node cluster for CI.
ClusterName=dualcog-ci
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# No cgroups in a container: track processes by parent PID, bind no tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
# Finished jobs stay visible to squeue for an hour: the executor polls their state there.
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=30
${node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF

slurmctld
slurmd
for _ in $(seq 1 60); do
    if sinfo -h -o "%t" 2>/dev/null | grep -Eq "^(idle|mix|alloc)"; then
        sinfo
        exit 0
    fi
    sleep 1
done
echo "slurm: the node did not come up; logs follow" >&2
tail -n 40 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
