/* cuda_emu/include/cublas_api.h — see cublas_v2.h. */
#include "cublas_v2.h"
