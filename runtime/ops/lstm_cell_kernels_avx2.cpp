// The LSTM step's element-wise kernels with AVX2, FMA and F16C (compiled
// with -mavx2 -mfma -mf16c, as ATen builds its AVX2 kernels).
#include "runtime/ops/lstm_cell_kernels_body.h"

HFTA_LSTM_CELL_BUILD(AVX2)
