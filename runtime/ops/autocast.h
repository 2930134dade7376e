#pragma once
// Mixed precision from C++: what `with torch.autocast(device, dtype):` does
// in Python. The hfta:: ops take autocast's policies themselves
// (autocast.cpp); this only turns autocast on and off.
#include <ATen/autocast_mode.h>

namespace hfta {

// Autocast on `device` in `dtype` (bfloat16 or float16) for the guard's
// scope, unless `enabled` is false (then it does nothing); on leaving, the
// previous state, and the cast weights cache cleared (as the context
// manager leaves it), so that the next step casts the updated weights again.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype, bool enabled = true)
      : device_(device),
        enabled_(enabled),
        was_enabled_(at::autocast::is_autocast_enabled(device)),
        was_dtype_(at::autocast::get_autocast_dtype(device)) {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

}  // namespace hfta
