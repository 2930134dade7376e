#pragma once
// FusedGradScaler with a fused optimizer against torch.amp.GradScaler and
// the same torch.optim optimizer on each member alone (the references of
// tests/python/make_optim_references.py), on the CPU or on CUDA.
#include <ATen/ATen.h>

#include <string>

namespace hfta::optim::testing {

// `reference`: "scaler_sgd", "scaler_adam" or "scaler_sgd_clipped" (which
// unscales, then clips each member's gradients to its own norm). Checks,
// for each of the 50 steps, every member's scale (exactly), whether it
// skipped the step (exactly), and its parameters.
void compareWithTorchGradScaler(const std::string& reference, at::Device device);

}  // namespace hfta::optim::testing
