/* runtime/platform.h — a platform description for simulation: the node's
 * processing units, memories and links, read from a JSON file
 * (docs/simulation.md documents the format; platforms/ ships examples).
 *
 * The description gives (1) the phantom memory nodes (memory/phantom.h),
 * the NVMe drives of a disk tier among them, and (2) for each device kind a rate model that estimates how long a task
 * takes on a device never measured: launch latency plus the larger of
 * compute time (the codelet's flops at the device's peak times the
 * codelet's efficiency) and memory time (the codelet's bytes at the
 * device's memory bandwidth times its efficiency) — a roofline.
 *
 * Must never: run a kernel, allocate device or phantom memory, or read
 * the wall clock; accept a file it cannot fully validate (every error is
 * TSR_EINVAL naming the file, the field and why).
 */
#ifndef TSR_RUNTIME_PLATFORM_H
#define TSR_RUNTIME_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>

#include <tessera/tessera.h>

#include "memory/phantom.h"

#define TSR_PLATFORM_MAX_CODELETS 32

/* Efficiency of one codelet on a device kind (fractions of the peaks). */
typedef struct tsr_platform_codelet {
    char name[48];               /* a codelet name, as tsr_codelet_t.name */
    double flops_efficiency;     /* of peak_flops (0: the device default) */
    double bytes_efficiency;     /* of mem_bandwidth (0: the device default) */
} tsr_platform_codelet_t;

/* How fast one kind of processing unit is. */
typedef struct tsr_platform_device {
    double peak_flops;           /* fp32 flop/s of one worker of this kind */
    double peak_flops_tf32;      /* flop/s of GEMMs with TF32 (CUDA); 0: = peak_flops */
    double peak_flops_bf16;      /* flop/s of GEMMs on bf16 operands (CUDA, dense);
                                    0: as the fp32 GEMMs (TF32 or FP32 peak) */
    double mem_bandwidth;        /* bytes/s one worker streams */
    double launch;               /* seconds added to every task */
    double flops_efficiency;     /* default fraction of the peak reached */
    double bytes_efficiency;     /* default fraction of the bandwidth */
    int ncodelets;
    tsr_platform_codelet_t codelets[TSR_PLATFORM_MAX_CODELETS];
} tsr_platform_device_t;

typedef struct tsr_platform {
    char name[64];
    char path[4096];             /* the file it was read from */
    /* Use this machine's calibrated performance models (history) where
     * they know a codelet ("models": "machine"), the rate model elsewhere;
     * otherwise the rate model alone, and the models the policies read
     * are kept under the platform's own name. */
    bool machine_models;
    /* With machine_models: the machine key (a folder of the model
     * directory) whose models to use, e.g. those of a real GPU node copied
     * here ("models_key"); "": this machine's. */
    char models_key[128];
    int ncpu;                    /* CPU workers */
    tsr_platform_device_t device[TSR_DEVICE_KINDS]; /* by TSR_DEVICE_… */
    double task_overhead;        /* seconds of runtime work per task on the
                                    worker that runs it (pop, data, release) */
    tsr_phantom_config_t mem;    /* memory nodes and links */
} tsr_platform_t;

/* Read and validate a platform file. Returns 0, or TSR_EINVAL /
 * TSR_ENOTFOUND / TSR_EIO with a message (tsr__fail). */
int tsr__platform_load(const char *path, tsr_platform_t *out);

/* Seconds one task of `cl` takes on a device of `kind` by the rate model:
 * launch + max(flops / (peak × eff), bytes / (bandwidth × eff)), flops
 * from cl->flops (0 if none), bytes from cl->bytes (else the sum of the
 * buffer sizes); on CUDA the bf16 GEMM codelet ("gemm_bf16") uses
 * peak_flops_bf16 where the file gives it, and with cuda_fp32 ==
 * TSR_CUDA_FP32_TF32 the other GEMM codelets ("gemm" in the name) and the
 * attention's use peak_flops_tf32. Never fails. */
double tsr__platform_task_seconds(const tsr_platform_t *p, int kind, const tsr_codelet_t *cl,
                                  const size_t *sizes, int nbuffers, const void *args,
                                  int cuda_fp32);

#endif
