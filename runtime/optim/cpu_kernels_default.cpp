// The CPU driver for any x86-64 (or other) CPU.
#include "runtime/optim/cpu_kernels.h"
#include "runtime/optim/cpu_kernels_instances.h"
