// The CPU driver with AVX2, FMA and F16C (compiled with -mavx2 -mfma -mf16c,
// as ATen builds its AVX2 kernels).
#include "runtime/optim/cpu_kernels.h"
#include "runtime/optim/cpu_kernels_instances.h"
