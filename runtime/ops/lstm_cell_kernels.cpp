// Picks the build of the LSTM step's kernels for this CPU.
#include "runtime/ops/lstm_cell_kernels.h"

#include "runtime/cpu_isa.h"

#define HFTA_DECLARE_LSTM_CELL_BUILD(ISA)                          \
  namespace hfta::ops::lstm_cell::ISA {                            \
  void forward(const Shape& s, const ForwardStep<float>& step);    \
  void forward(const Shape& s, const ForwardStep<double>& step);   \
  void backward(const Shape& s, const BackwardStep<float>& step);  \
  void backward(const Shape& s, const BackwardStep<double>& step); \
  }
HFTA_DECLARE_LSTM_CELL_BUILD(DEFAULT)
HFTA_DECLARE_LSTM_CELL_BUILD(AVX2)
#undef HFTA_DECLARE_LSTM_CELL_BUILD

namespace hfta::ops::lstm_cell {

void forward(const Shape& s, const ForwardStep<float>& step) {
  runtime::useAvx2Kernels() ? AVX2::forward(s, step) : DEFAULT::forward(s, step);
}
void forward(const Shape& s, const ForwardStep<double>& step) {
  runtime::useAvx2Kernels() ? AVX2::forward(s, step) : DEFAULT::forward(s, step);
}
void backward(const Shape& s, const BackwardStep<float>& step) {
  runtime::useAvx2Kernels() ? AVX2::backward(s, step) : DEFAULT::backward(s, step);
}
void backward(const Shape& s, const BackwardStep<double>& step) {
  runtime::useAvx2Kernels() ? AVX2::backward(s, step) : DEFAULT::backward(s, step);
}

}  // namespace hfta::ops::lstm_cell
