/* memory/phantom.h — phantom memory nodes: the host, the accelerators and
 * the disk tier (NVMe storage) of a simulated platform, with capacities for
 * accounting and links whose transfers take virtual time, but no bytes
 * (unless the simulation also executes kernels).
 *
 * A phantom node's memory is address space reserved without backing
 * (MAP_NORESERVE): an allocation is an address range that reads as zeros
 * and costs nothing until written, so a 50 B-parameter model's tiles can
 * be described on a small machine, and an application that reads a
 * phantom tile (a loss, a norm) reads zeros. A copy between phantom nodes
 * moves no byte (exec: it does copy, at its completion); it is queued on
 * the engine lane of the node that performs it and completes, as a
 * virtual-clock event (memory/vclock.h), after latency + bytes over the
 * bandwidth it gets: the transfers in flight share every link on their
 * route max-min fairly (each link's bandwidth split evenly among its
 * transfers, a transfer limited by its most loaded link, the bandwidth
 * others leave unused redistributed), and rates are recomputed whenever a
 * transfer starts or ends.
 *
 * Routes, as the directory routes copies (it copies host ↔ node on the
 * node's engine, and node ↔ node directly only where peer() says so):
 *   host → accelerator i:  host memory, i's PCIe switch uplink (down), i's
 *                          own link (down)
 *   accelerator i → host:  the same links in the other direction
 *   accelerator i → j (peers, "nvlink" in the platform): i's NVLink out,
 *                          j's NVLink in
 *   host → disk:           host memory, the drives' write link
 *   disk → host:           the drives' read link, host memory
 *   disk → accelerator i (GPUDirect Storage, CUDA only): the drives' read
 *                          link, i's PCIe switch uplink (down), i's own
 *                          link (down); i → disk the reverse, into the
 *                          drives' write link
 * Each direction of a link is a separate link (full duplex). A CUDA-kind
 * node's engine has two lanes (into it, out of it), each one copy at a
 * time in FIFO order, as memory/cuda.cu's two DMA streams; a SIM-kind
 * node's engine has one lane, as memory/sim.c's engine thread; the disk
 * node's two lanes (writes into it, reads out of it), as the real disk
 * tier's two engine threads (memory/disk.c).
 *
 * The disk node plays memory/disk.h's role under simulation: kind
 * TSR_NODE_KIND_DISK, last in the node table, no worker; the directory
 * writes the host's evicted copies back to it and reads them back on
 * demand, as with the real tier. Its links are the drives' aggregate
 * bandwidth (RAID-0 striping: one large copy uses every drive).
 *
 * Must never: touch the bytes of a replica when not executing; complete a
 * copy inside the call that queued it; depend on anything but the order
 * of calls and the platform (no wall clock, no addresses in decisions).
 */
#ifndef TSR_MEMORY_PHANTOM_H
#define TSR_MEMORY_PHANTOM_H

#include <stdbool.h>
#include <stddef.h>

#include "memory/memory.h"

#define TSR_PHANTOM_MAX_ACC (TSR_MAX_NODES - 1)
/* The `acc` of tsr__phantom_node_open that opens the disk node. */
#define TSR_PHANTOM_DISK (-2)
/* The largest disk (bytes): its address range must fit beside the others. */
#define TSR_PHANTOM_MAX_DISK ((size_t)32 << 40)

/* One link direction: seconds of latency per transfer, bytes per second. */
typedef struct tsr_phantom_link {
    double latency;
    double bandwidth;     /* 0: unlimited (the link does not constrain) */
} tsr_phantom_link_t;

typedef struct tsr_phantom_acc {
    int kind;                    /* TSR_NODE_KIND_CUDA or TSR_NODE_KIND_SIM */
    size_t capacity;             /* bytes */
    tsr_phantom_link_t link;     /* its own link to the host (each way) */
    int pcie_switch;             /* index into switches[], or -1: none */
    tsr_phantom_link_t nvlink;   /* its port on the GPU fabric (each way);
                                    bandwidth 0 with peer false */
    bool peer;                   /* copies to/from other peer nodes go
                                    direct over the fabric */
    double fill_bandwidth;       /* bytes/s of a zero fill on the node */
} tsr_phantom_acc_t;

/* NVMe storage below the host: every drive together. */
typedef struct tsr_phantom_disk {
    size_t capacity;             /* bytes; 0: no disk */
    tsr_phantom_link_t read;     /* out of the drives (aggregate, > 0) */
    tsr_phantom_link_t write;    /* into the drives (aggregate, > 0) */
    bool gpudirect;              /* CUDA accelerators copy to and from it
                                    directly (GPUDirect Storage); false:
                                    through the host */
} tsr_phantom_disk_t;

typedef struct tsr_phantom_config {
    size_t host_capacity;        /* bytes; 0: unlimited */
    tsr_phantom_link_t host_mem; /* host memory, shared by every transfer
                                    that reads or writes host replicas */
    int nacc;
    tsr_phantom_acc_t acc[TSR_PHANTOM_MAX_ACC];
    int nswitches;
    tsr_phantom_link_t switches[TSR_PHANTOM_MAX_ACC]; /* PCIe switch uplinks */
    tsr_phantom_disk_t disk;     /* capacity 0: none */
    bool exec;                   /* real bytes: replicas are backed on touch,
                                    copies copy (at completion) */
} tsr_phantom_config_t;

/* Open node n as the phantom host (acc == -1), phantom accelerator acc,
 * or the disk (acc == TSR_PHANTOM_DISK, with cfg->disk.capacity > 0) of
 * cfg (the first node opened copies cfg; the copy is forgotten when the
 * last phantom node closes). Returns 0, or a TSR_E… code with a message in
 * err. Copies need the virtual clock on (else the copy op fails with
 * TSR_ESTATE). */
int tsr__phantom_node_open(tsr_node_t *n, const tsr_phantom_config_t *cfg, int acc,
                           char *err, size_t errlen);

/* The platform's latency and bandwidth from node src to node dst, as an
 * uncontended transfer sees them (the bus model reads this instead of
 * measuring): the sum of the route's latencies and its narrowest limited
 * link, 0 when no link on the route is limited; src == dst: a zero fill
 * (latency 0, the node's fill bandwidth). false if src or dst is not a
 * phantom node. */
bool tsr__phantom_link(int src, int dst, double *latency_s, double *bytes_per_s);

#endif
