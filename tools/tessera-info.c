/* tools/tessera-info.c — what Tessera sees on this node: CPU cores and
 * workers, built-in scheduling policies, CUDA devices.
 *
 * It only reports; it must never change any setting of the machine.
 */
#include <tessera/sched.h>
#include <tessera/tessera.h>

#include <stdio.h>

int main(void)
{
    printf("tessera %d.%d\n", TSR_VERSION_MAJOR, TSR_VERSION_MINOR);
    int rc = tsr_init(NULL);
    if (rc != TSR_OK) {
        fprintf(stderr, "tessera-info: %s\n", tsr_error_message());
        return 1;
    }
    printf("cpu workers: %d\n", tsr_worker_count());
    tsr_shutdown();
    printf("policies:");
    const tsr_sched_policy_t *p;
    for (int i = 0; (p = tsr_sched_builtin_at(i)) != NULL; i++)
        printf("\n  %-8s %s", p->name, p->description);
    printf("\ncuda: %s\n", tsr_cuda_built() ? "built" : "not built");
    int n = tsr_cuda_device_count();
    printf("cuda devices: %d\n", n);
    for (int i = 0; i < n; i++) {
        tsr_device_info_t info;
        if (tsr_cuda_device_info(i, &info) != TSR_OK) {
            printf("  %d: %s\n", i, tsr_error_message());
            continue;
        }
        printf("  %d: %s, sm_%d%d, %d SMs, %.1f GiB (%.1f GiB free)\n", i, info.name,
               info.cc_major, info.cc_minor, info.multiprocessors,
               info.total_mem / 1073741824.0, info.free_mem / 1073741824.0);
    }
    return 0;
}
