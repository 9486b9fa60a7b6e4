/* A plug-in that must be refused: it exports a pointer to its policy
 * instead of the policy itself. */
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

static const tsr_sched_policy_t policy = {.name = "pointer", .push = push, .pop = pop};
const tsr_sched_policy_t *const tsr_sched_policy = &policy;
