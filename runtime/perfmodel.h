/* runtime/perfmodel.h — performance models of the runtime's own execution:
 * codelet execution history (perfmodel.c, fed by the workers) and the bus
 * model (bus.c), behind the public tsr_perfmodel_* / tsr_bus_model calls and
 * the policy's tsr_sched_expected_* calls. Both keep their files in the
 * model directory (perfmodel_store.h) and do not know each other.
 *
 * History is kept per (codelet name, device kind, footprint of the buffer
 * sizes); an estimate is the median of the recent samples, so a spike does
 * not move it; a footprint never seen is estimated by a regression over the
 * codelet's other footprints. Models load at open and save at close (and on
 * tsr_perfmodel_save) as text files under <dir>/<machine key>/.
 * Opening or closing the models opens or closes the model directory, which
 * makes the bus model stale (read back or measured again for the new nodes).
 *
 * Must never: block a worker for long (one short lock per sample), abort on
 * a corrupt or unreadable file (it is ignored with a warning and rebuilt),
 * write a model file in place (temp file + rename).
 */
#ifndef TSR_RUNTIME_PERFMODEL_H
#define TSR_RUNTIME_PERFMODEL_H

#include <tessera/tessera.h>

#include <stdbool.h>
#include <stddef.h>

/* Samples of one footprint kept for its median. */
#define TSR_PERFMODEL_WINDOW 32
/* Samples a footprint needs before its history is trusted (below that the
 * regression answers, or nothing when calibrating). */
#define TSR_PERFMODEL_MIN_SAMPLES 3
/* ... and when calibrating (TESSERA_CALIBRATE=1). */
#define TSR_PERFMODEL_CALIBRATE_SAMPLES 10

/* Load the codelet models of this machine from dir (NULL: the default
 * cache directory; "": keep nothing on disk). calibrate: as in
 * tsr_config_t. On failure returns a TSR_E… code with a message in err;
 * an unreadable or corrupt file is not a failure. */
int tsr__perfmodel_open(const char *dir, int calibrate, char *err, size_t errlen);
/* Save (if a directory is set) and free everything. */
void tsr__perfmodel_close(void);
/* Write the models now. TSR_EIO with a message if that fails. */
int tsr__perfmodel_save(void);

/* One measured run. Thread-safe; a short critical section. */
void tsr__perfmodel_sample(const tsr_codelet_t *cl, int device_kind,
                           const size_t *sizes, int nbuffers, const void *args,
                           double seconds);
/* The estimate, or false when nothing is known. A codelet's own model
 * (tsr_codelet_t.seconds), where it answers, is the estimate, and its
 * tasks are neither sampled nor drawn. */
bool tsr__perfmodel_estimate(const tsr_codelet_t *cl, int device_kind,
                             const size_t *sizes, int nbuffers, const void *args,
                             tsr_perfmodel_info_t *out);

/* A prior: seconds of one task of cl on device_kind for a device never
 * measured (the simulation driver's rate model). Installed, it answers
 * tsr__perfmodel_estimate where history has nothing (history true) or
 * always (history false), so that policies read exactly the durations the
 * simulation uses. NULL removes it. */
/* One of the durations recorded for this footprint (a trusted one, as
 * tsr__perfmodel_estimate would use), the u-th of the window (u in [0, 1)):
 * the simulation draws task durations from what this machine measured, so
 * that simulated runs see the measured spread (a median alone would make
 * every sum and every critical path too short). false if none. */
bool tsr__perfmodel_draw(const tsr_codelet_t *cl, int device_kind, const size_t *sizes,
                         int nbuffers, const void *args, double u, double *seconds);

typedef double (*tsr_perfmodel_prior_fn)(const tsr_codelet_t *cl, int device_kind,
                                        const size_t *sizes, int nbuffers,
                                        const void *args);
void tsr__perfmodel_set_prior(tsr_perfmodel_prior_fn fn, bool history);

/* Bus model. Measure (or read back from the model directory) the latency
 * and bandwidth of every link between the open memory nodes. Called once
 * per tsr_init by a runtime whose policy uses models, after the memory
 * nodes are open and before workers start. */
int tsr__bus_calibrate(char *err, size_t errlen);
/* Whether tsr__bus_calibrate ran for the current nodes (since the model
 * directory was last opened or closed). */
bool tsr__bus_ready(void);
/* The model of src → dst; false if not calibrated. */
bool tsr__bus_link(int src, int dst, double *latency_s, double *bytes_per_s);
/* Predicted seconds to move bytes from src to dst (0 if src == dst; two
 * hops through the host when neither end is the host and the nodes
 * cannot copy directly; 0 if not calibrated). */
double tsr__bus_time(int src, int dst, size_t bytes);

#endif
