// The pickles of a TorchScript archive, checked before LibTorch reads them.
#pragma once

#include <cstdint>
#include <string>

namespace hfta {

// Throws UserError naming the record if a pickle of the archive at `path`
// would make LibTorch's readers exhaust memory (pickle_scan.h) or index
// out of bounds (a `.debug_pkl`: which Python line made each line of saved
// code). Archives that are not whole zips pass: loading them fails with
// its own message.
void checkArchivePickles(const std::string& path, int64_t index);

}  // namespace hfta
