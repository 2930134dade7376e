// The LSTM step's element-wise kernels for any x86-64 (or other) CPU.
#include "runtime/ops/lstm_cell_kernels_body.h"

HFTA_LSTM_CELL_BUILD(DEFAULT)
