/* A plug-in that must be refused: its policy has no pop. */
#include <tessera/sched.h>

static int push(tsr_sched_t *s, tsr_task_t t)
{
    (void)s;
    (void)t;
    return -1;
}

const tsr_sched_policy_t tsr_sched_policy = {.name = "nopop", .push = push};
