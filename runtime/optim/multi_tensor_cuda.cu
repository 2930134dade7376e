// The multi-tensor kernel: block i updates chunk i (at most kChunk elements
// of one member of one tensor) with that member's scalars.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstring>

#include "runtime/optim/multi_tensor.h"

namespace hfta::optim::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 16 * 1024;

template <typename scalar_t>
struct TensorPointers {
  scalar_t* param;
  const scalar_t* grad;
  scalar_t* state[rules::kMaxStates];
};

struct Chunk {
  int64_t tensor, member, begin, end;
};

template <typename Rule, typename scalar_t>
__global__ void multiTensorKernel(const TensorPointers<scalar_t>* tensors, const Chunk* chunks,
                                  const typename Rule::Scalars* scalars, int64_t members) {
  using acc = at::opmath_type<scalar_t>;
  const Chunk c = chunks[blockIdx.x];
  const TensorPointers<scalar_t> t = tensors[c.tensor];
  const typename Rule::Scalars s = scalars[c.tensor * members + c.member];
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += blockDim.x) {
    acc state[rules::kMaxStates];
#pragma unroll
    for (int j = 0; j < rules::kMaxStates; ++j) {
      if (t.state[j] != nullptr) state[j] = t.state[j][k];
    }
    acc p = t.param[k];
    Rule::template apply<acc>(p, static_cast<acc>(t.grad[k]), state, s);
    t.param[k] = p;
#pragma unroll
    for (int j = 0; j < rules::kMaxStates; ++j) {
      if (t.state[j] != nullptr) t.state[j][k] = state[j];
    }
  }
}

// Appends `n` objects to a byte buffer and returns where they start.
template <typename T>
size_t append(std::vector<char>& bytes, const T* data, size_t n) {
  const size_t offset =
      (bytes.size() + alignof(std::max_align_t) - 1) / alignof(std::max_align_t) * alignof(std::max_align_t);
  bytes.resize(offset + n * sizeof(T));
  std::memcpy(bytes.data() + offset, data, n * sizeof(T));
  return offset;
}

// Chunks of tensor t ([members, ...] with `numel` elements): each member's
// range cut into pieces of at most kChunk, skipping the members marked idle.
void appendChunks(std::vector<Chunk>& chunks, int64_t t, int64_t numel, int64_t members,
                  const std::vector<uint8_t>& idle) {
  const int64_t member_numel = numel / members;
  for (int64_t b = 0; b < members; ++b) {
    if (!idle.empty() && idle[b] != 0) continue;
    for (int64_t begin = b * member_numel; begin < (b + 1) * member_numel; begin += kChunk) {
      chunks.push_back({t, b, begin, std::min(begin + kChunk, (b + 1) * member_numel)});
    }
  }
}

// The table in one asynchronous host-to-device copy (through pinned
// memory); the kernels launched after it on the current stream read it.
at::Tensor upload(const std::vector<char>& bytes, c10::Device device) {
  auto host = at::empty({static_cast<int64_t>(bytes.size())}, at::TensorOptions(at::kByte).pinned_memory(true));
  std::memcpy(host.data_ptr(), bytes.data(), bytes.size());
  return host.to(device, /*non_blocking=*/true);
}

// Block i unscales chunk i: its member's elements times that member's
// inverse scale, noting a non-finite one in found_inf[member] (every writer
// writes 1).
template <typename scalar_t>
__global__ void unscaleKernel(scalar_t* const* grads, const Chunk* chunks, const float* inv_scale, float* found_inf) {
  using acc = at::opmath_type<scalar_t>;
  const Chunk c = chunks[blockIdx.x];
  scalar_t* g = grads[c.tensor];
  const acc inv = inv_scale[c.member];
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += blockDim.x) {
    const acc v = static_cast<acc>(g[k]);
    if (!isfinite(v)) found_inf[c.member] = 1.f;
    g[k] = static_cast<scalar_t>(inv == acc(1) ? v : v * inv);
  }
}

}  // namespace

void multiTensorUnscale(const std::vector<at::Tensor>& grads, const std::vector<float>& inv_scale,
                        at::Tensor& found_inf) {
  if (grads.empty()) return;
  const auto& first = grads[0];
  const int64_t members = static_cast<int64_t>(inv_scale.size());
  TORCH_CHECK(
      first.is_cuda() && found_inf.is_cuda() && found_inf.scalar_type() == at::kFloat && found_inf.numel() == members,
      "hfta loss scaler: unscaling needs CUDA gradients and a float32 found_inf of one flag per member");
  const c10::cuda::CUDAGuard guard(first.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), "hfta_unscale", [&] {
    std::vector<scalar_t*> pointers;
    std::vector<Chunk> chunks;
    for (size_t t = 0; t < grads.size(); ++t) {
      const auto& g = grads[t];
      TORCH_CHECK(g.scalar_type() == first.scalar_type() && g.device() == first.device() && g.is_contiguous(),
                  "hfta loss scaler: CUDA gradients must be contiguous, of one dtype and on one device");
      pointers.push_back(g.data_ptr<scalar_t>());
      appendChunks(chunks, static_cast<int64_t>(t), g.numel(), members, {});
    }
    if (chunks.empty()) return;
    std::vector<char> bytes;
    const size_t pointers_at = append(bytes, pointers.data(), pointers.size());
    const size_t chunks_at = append(bytes, chunks.data(), chunks.size());
    const size_t scales_at = append(bytes, inv_scale.data(), inv_scale.size());
    const auto table = upload(bytes, first.device());
    const char* base = static_cast<const char*>(table.data_ptr());
    unscaleKernel<scalar_t><<<chunks.size(), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<scalar_t* const*>(base + pointers_at), reinterpret_cast<const Chunk*>(base + chunks_at),
        reinterpret_cast<const float*>(base + scales_at), found_inf.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

template <typename Rule>
void multiTensorApply(TensorGroup& group, const std::vector<typename Rule::Scalars>& scalars, int64_t members,
                      const std::vector<uint8_t>& idle) {
  if (group.params.empty()) return;
  const auto& first = group.params[0];
  TORCH_CHECK(first.is_cuda(), "hfta optimizer: multiTensorApply needs CUDA tensors");
  TORCH_CHECK(scalars.size() == group.params.size() * members, "hfta optimizer: ", scalars.size(), " scalars for ",
              group.params.size(), " tensors of ", members, " members");
  const c10::cuda::CUDAGuard guard(first.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), "hfta_multi_tensor", [&] {
    std::vector<TensorPointers<scalar_t>> tensors;
    std::vector<Chunk> chunks;
    for (size_t t = 0; t < group.params.size(); ++t) {
      auto& p = group.params[t];
      TORCH_CHECK(p.scalar_type() == first.scalar_type() && p.device() == first.device() && p.is_contiguous() &&
                      group.grads[t].is_contiguous(),
                  "hfta optimizer: CUDA parameters must be contiguous, of one dtype and on one device");
      TensorPointers<scalar_t> ptrs{p.data_ptr<scalar_t>(), group.grads[t].data_ptr<scalar_t>(), {}};
      for (int j = 0; j < rules::kMaxStates; ++j) {
        const auto& st = group.states[t][j];
        ptrs.state[j] = st.defined() ? st.data_ptr<scalar_t>() : nullptr;
      }
      tensors.push_back(ptrs);
      appendChunks(chunks, static_cast<int64_t>(t), p.numel(), members, idle);
    }
    if (chunks.empty()) return;
    // One host-to-device copy of the whole table.
    std::vector<char> bytes;
    const size_t tensors_at = append(bytes, tensors.data(), tensors.size());
    const size_t chunks_at = append(bytes, chunks.data(), chunks.size());
    const size_t scalars_at = append(bytes, scalars.data(), scalars.size());
    const auto table = upload(bytes, first.device());
    const char* base = static_cast<const char*>(table.data_ptr());
    multiTensorKernel<Rule, scalar_t><<<chunks.size(), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const TensorPointers<scalar_t>*>(base + tensors_at),
        reinterpret_cast<const Chunk*>(base + chunks_at),
        reinterpret_cast<const typename Rule::Scalars*>(base + scalars_at), members);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

#define HFTA_CUDA_APPLY(RULE)                                                                                  \
  template void multiTensorApply<rules::RULE>(TensorGroup&, const std::vector<rules::RULE::Scalars>&, int64_t, \
                                              const std::vector<uint8_t>&);
HFTA_FOR_EACH_UPDATE_RULE(HFTA_CUDA_APPLY)
#undef HFTA_CUDA_APPLY

}  // namespace hfta::optim::cuda
