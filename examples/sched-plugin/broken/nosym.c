/* A plug-in that must be refused: its policy is exported under the wrong
 * name (the runtime looks for `tsr_sched_policy`). */
#include <tessera/sched.h>

static int push(tsr_sched_t *s, tsr_task_t t)
{
    (void)s;
    (void)t;
    return -1;
}

static tsr_task_t pop(tsr_sched_t *s, int worker)
{
    (void)s;
    (void)worker;
    return NULL;
}

const tsr_sched_policy_t tessera_sched_policy = {.name = "nosym", .push = push, .pop = pop};
