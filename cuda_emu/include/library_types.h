/* cuda_emu/include/library_types.h — see cublas_v2.h (cudaDataType_t). */
#include "cublas_v2.h"
