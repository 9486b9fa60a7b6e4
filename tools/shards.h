/* tools/shards.h — the pair of token shards tessera-tokenize writes,
 * OUT_train.bin and OUT_val.bin, replaced together and described by the
 * manifest OUT.manifest:
 *   tessera-tokenize shards 1
 *   train OUT_train.bin <tokens> <FNV-1a 64 of the file, 16 hex digits>
 *   val OUT_val.bin <tokens> <checksum>          (absent without --val-fraction)
 *
 * Publishing: both new shards and the new manifest are written complete
 * (synced) under temporary names, so a full disk fails before anything is
 * replaced; then renames only: the old validation shard given a second
 * name (a backup, by a hard link), the new validation shard in, the new training shard in (if that fails,
 * the old validation shard is put back), the manifest in, the folder synced,
 * the backup removed. A process killed between the renames leaves shards
 * that the manifest in place does not describe, which every program reading
 * a shard of a pair (cli_check_shard) refuses; the next run of
 * tessera-tokenize removes the leftovers. Every action is a point of the
 * TESSERA_FAULT_AT test hook (fault.h).
 *
 * Must never: leave OUT_train.bin and OUT_val.bin of different runs without
 * either reporting a failure or leaving a manifest that exposes it.
 */
#ifndef TESSERA_TOOLS_SHARDS_H
#define TESSERA_TOOLS_SHARDS_H

#include <stddef.h>
#include <stdint.h>

/* tokens[0, ntrain) to OUT_train.bin, the nval after them to OUT_val.bin
 * (nval 0: no validation shard; an old one is removed), published together,
 * both with tokens of `width` bytes (tsr_shard_write_width: 2, 4, or 0 for
 * the narrowest). Returns 0, or 1 after reporting. */
int shards_publish(const char *prefix, const int32_t *tokens, size_t ntrain, size_t nval,
                   int width);

/* When `path` is PREFIX_train.bin or PREFIX_val.bin and PREFIX.manifest
 * exists, whether the manifest lists this file as it is. 0 (also when there
 * is no manifest: shards of other tools), or 1 after reporting. */
int shards_check(const char *role, const char *path);

#endif
