#pragma once
// A fresh member of a model: its layers re-initialized from a seed the way
// PyTorch's layers initialize themselves (torch.manual_seed(seed), then each
// layer's reset_parameters in construction order), so member b equals what
// `torch.manual_seed(b); Model()` gives in Python for models built of these
// layers.
#include <torch/script.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hfta::train {

// Linear, Conv1d/2d/3d and ConvTranspose1d/2d/3d: kaiming_uniform_(a =
// sqrt(5)) weights and uniform(+-1/sqrt(fan_in)) biases; BatchNorm1d/2d/3d:
// ones, zeros and fresh running statistics. Any other module with
// parameters is a UserError (give B model files instead).
torch::jit::Module reinitialized(const torch::jit::Module& model, uint64_t seed);

// One fresh member of `model` per seed, fused into one module (an array of
// one member too: a baseline trained as a sweep is). `source` names the
// model in the fused module's record.
torch::jit::Module freshArray(const torch::jit::Module& model, const std::vector<uint64_t>& seeds,
                              const std::string& source);

}  // namespace hfta::train
