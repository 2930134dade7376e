#pragma once
// Writing a file so that readers see the old one or the whole new one,
// never a part: write a temporary file next to it, then rename.
#include <functional>
#include <stdexcept>
#include <string>

namespace hfta {

// Why a file could not be written, in one line that names the path.
struct FileWriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Calls write(tmp_path) and renames tmp_path to `path`. If the folder does
// not exist, write throws, or the rename fails: FileWriteError, no file left
// behind, and an existing `path` untouched.
void writeAtomically(const std::string& path, const std::function<void(const std::string&)>& write);

}  // namespace hfta
