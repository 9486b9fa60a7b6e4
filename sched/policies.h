/* sched/policies.h — the built-in policies, each in its own file.
 *
 * A policy here must use only <tessera/sched.h>, exactly like a plug-in.
 */
#ifndef TSR_SCHED_POLICIES_H
#define TSR_SCHED_POLICIES_H

#include <tessera/sched.h>

extern const tsr_sched_policy_t tsr__policy_eager;
extern const tsr_sched_policy_t tsr__policy_prio;
extern const tsr_sched_policy_t tsr__policy_random;
extern const tsr_sched_policy_t tsr__policy_ws;
extern const tsr_sched_policy_t tsr__policy_dmda;
extern const tsr_sched_policy_t tsr__policy_heft;

#endif
