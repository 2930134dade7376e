// A walk over a pickle's opcodes that finds what would make LibTorch's
// unpickler allocate without bound, before it reads the pickle.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace hfta {

// Why unpickling `data` could exhaust memory (a length or memo index that
// no pickle of `size` bytes can need), or nullopt. LibTorch's Unpickler
// sizes its buffers from these fields before it reads what they describe:
// a string of the declared length, a memo table up to the declared index.
// Other damage is left to LibTorch, which reports it.
std::optional<std::string> pickleHazard(const char* data, size_t size);

}  // namespace hfta
