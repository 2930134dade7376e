// Which build of the runtime's own CPU kernels runs here: the AVX2 one
// (compiled with -mavx2 -mfma -mf16c, as ATen builds its AVX2 kernels)
// where the CPU has AVX2 and FMA, unless ATEN_CPU_CAPABILITY=default asks
// for the base x86-64 build, as it does of ATen's. Used by the optimizers'
// driver (optim/cpu_dispatch.cpp) and the LSTM step (ops/lstm_cell_kernels.h).
#pragma once

namespace hfta::runtime {

bool useAvx2Kernels();

}  // namespace hfta::runtime
