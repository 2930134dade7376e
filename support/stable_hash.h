#pragma once
// A 64-bit hash that is the same in every process and build (FNV-1a), for
// keys that outlive a process (the measurement cache's).
#include <cstdint>
#include <string_view>

namespace hfta {

class StableHash {
 public:
  StableHash& add(std::string_view bytes) {
    for (const unsigned char c : bytes) step(c);
    return *this;
  }
  StableHash& add(int64_t word) {
    step(static_cast<uint64_t>(word));
    return *this;
  }
  uint64_t value() const { return hash_; }

 private:
  void step(uint64_t v) { hash_ = (hash_ ^ v) * 1099511628211ULL; }
  uint64_t hash_ = 14695981039346656037ULL;
};

}  // namespace hfta
