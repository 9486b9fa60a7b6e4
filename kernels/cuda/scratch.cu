/* Per-stream device scratch buffers of the CUDA launchers
 * (kernels/cuda/scratch.cuh): a small table under one lock. */
#include <mutex>
#include <string.h>

#include <tessera/tessera.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/scratch.cuh"

namespace {

enum { MAX_STREAMS = 256 };

struct Entry {
    int device;
    cudaStream_t stream;
    void *buf[TSR_SCRATCH_SLOTS];
    size_t bytes[TSR_SCRATCH_SLOTS];
};

std::mutex mu;
Entry table[MAX_STREAMS];
int used;

} // namespace

int tsr_cuda_stream_scratch(cudaStream_t stream, int slot, size_t bytes, void **out)
{
    if (slot < 0 || slot >= TSR_SCRATCH_SLOTS)
        return tsr_cuda_invalid("tsr_cuda_stream_scratch: slot %d", slot);
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
        return tsr_cuda_failed("tsr_cuda_stream_scratch: cudaGetDevice", e);
    std::lock_guard<std::mutex> lk(mu);
    Entry *en = nullptr;
    for (int i = 0; i < used && !en; i++)
        if (table[i].device == device && table[i].stream == stream)
            en = &table[i];
    if (!en) {
        if (used == MAX_STREAMS)
            return tsr_cuda_invalid("tsr_cuda_stream_scratch: more than %d streams", MAX_STREAMS);
        en = &table[used++];
        memset(en, 0, sizeof *en);
        en->device = device;
        en->stream = stream;
    }
    if (bytes > en->bytes[slot]) {
        size_t want = bytes < 16384 ? 16384 : bytes;
        if (en->buf[slot]) { /* queued work may still use the old one */
            if ((e = cudaStreamSynchronize(stream)) != cudaSuccess)
                return tsr_cuda_failed("tsr_cuda_stream_scratch: cudaStreamSynchronize", e);
            cudaFree(en->buf[slot]);
            en->buf[slot] = nullptr;
            en->bytes[slot] = 0;
        }
        void *p = nullptr;
        if ((e = cudaMalloc(&p, want)) != cudaSuccess)
            return tsr_cuda_failed("tsr_cuda_stream_scratch: cudaMalloc", e);
        en->buf[slot] = p;
        en->bytes[slot] = want;
    }
    *out = en->buf[slot];
    return 0;
}
