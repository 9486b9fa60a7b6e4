/* runtime/perfmodel.h — performance models: codelet execution history and the
 * bus model, behind the public tsr_perfmodel_* / tsr_bus_model calls and the
 * policy's tsr_sched_expected_* calls.
 *
 * History is kept per (codelet name, device kind, footprint of the buffer
 * sizes); an estimate is the median of the recent samples, so a spike does
 * not move it; a footprint never seen is estimated by a regression over the
 * codelet's other footprints. Models load at open and save at close (and on
 * tsr_perfmodel_save) as text files under <dir>/<machine key>/.
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
/* The estimate, or false when nothing is known. */
bool tsr__perfmodel_estimate(const tsr_codelet_t *cl, int device_kind,
                             const size_t *sizes, int nbuffers, const void *args,
                             tsr_perfmodel_info_t *out);

/* Between perfmodel.c and bus.c (bus.txt lives beside the codelet models):
 * the machine directory of the open models ("" when kept in memory only),
 * reading a file there (NULL with *missing or a message) and writing one
 * atomically (temp file + rename); bus.c forgets its links whenever the
 * models are opened or closed. */
const char *tsr__perfmodel_machine_dir(void);
char *tsr__perfmodel_read_file(const char *name, bool *missing, char *err, size_t errlen);
int tsr__perfmodel_write_file(const char *name, const char *data, size_t len, char *err,
                              size_t errlen);
void tsr__bus_reset(void);

/* Bus model. Measure (or read back from the model directory) the latency
 * and bandwidth of every link between the open memory nodes. Called once
 * per tsr_init by a runtime whose policy uses models, after the memory
 * nodes are open and before workers start. */
int tsr__bus_calibrate(char *err, size_t errlen);
/* Whether tsr__bus_calibrate ran for the current nodes. */
bool tsr__bus_ready(void);
/* The model of src → dst; false if not calibrated. */
bool tsr__bus_link(int src, int dst, double *latency_s, double *bytes_per_s);
/* Predicted seconds to move bytes from src to dst (0 if src == dst; two
 * hops through the host when neither end is the host and the nodes
 * cannot copy directly; 0 if not calibrated). */
double tsr__bus_time(int src, int dst, size_t bytes);

#endif
