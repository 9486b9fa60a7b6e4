#!/usr/bin/env bash
# A rank raises SIGKILL mid-job (test_mpi kill): the job must end with a
# non-zero status, and within 60 s (mpirun notices the dead rank, or the
# others' transfer times out and they exit 1).
# usage: run-kill.sh MPIRUN TEST_MPI
set -u
mpirun=$1
prog=$2
start=$(date +%s)
"$mpirun" -np 3 --oversubscribe "$prog" kill
status=$?
elapsed=$(( $(date +%s) - start ))
echo "job ended with status $status after ${elapsed} s"
if [ "$status" -eq 0 ]; then
  echo "FAIL: the job exited 0 although a rank was killed"
  exit 1
fi
if [ "$elapsed" -ge 60 ]; then
  echo "FAIL: the job took ${elapsed} s to end (limit 60 s)"
  exit 1
fi
echo "ok"
exit 0
