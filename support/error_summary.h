#pragma once
// LibTorch's errors carry a backtrace and, from TorchScript code, two
// tracebacks; hfta's messages quote only the line that says what went wrong.
#include <exception>
#include <string>

namespace hfta {

// The line of a LibTorch error that says what went wrong: its first line
// (without c10::Error's backtrace), or, for an error raised inside
// TorchScript code ("The following operation failed in the TorchScript
// interpreter." and two tracebacks), its last.
std::string errorSummary(const std::exception& error);

}  // namespace hfta
