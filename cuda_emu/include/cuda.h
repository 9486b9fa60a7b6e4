/* cuda_emu/include/cuda.h — the emulation has no driver API; the runtime only. */
#include "cuda_runtime_api.h"
