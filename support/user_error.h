#pragma once
// The one error type every layer of hfta throws for what the user can fix.
#include <stdexcept>

namespace hfta {

// An error the user can fix (bad file, incompatible models, bad option). Its
// message names what to fix; tools exit with code 2 on it.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hfta
