/* tools/fault.h — the test hook of the programs' file publishing (the run
 * folder of tessera-train, the shard pair of tessera-tokenize).
 *
 * TESSERA_FAULT_AT=kill:N (or just N) ends the process with _exit(137) right
 * after the N-th action counted by fault_after (a write, an fsync, a rename,
 * a removal), as kill -9 would: no cleanup, no atexit. TESSERA_FAULT_AT=
 * enospc:N makes the N-th fault_write report a full disk (errno ENOSPC).
 * Counts run over the whole process. Unset, both cost a branch.
 *
 * Must never: be read by anything but the publishing code, or change what a
 * program does when the variable is unset.
 */
#ifndef TESSERA_TOOLS_FAULT_H
#define TESSERA_TOOLS_FAULT_H

/* After each action of a publication. */
void fault_after(void);
/* Before each file write: nonzero (errno ENOSPC) for the chosen one. */
int fault_write(void);

#endif
