#pragma once
// Taking members out of arrays' state dicts and putting them into a new
// array's: what an array that shrinks (a tuner stops some of its trials) or
// that merges the members of several arrays needs. State dicts keep one
// entry per member in lists of B values and in tensors stacked on dim 0;
// each class that writes one says how its entries gather.
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace hfta {

// Member `member` of the array whose state dict is `state`.
struct MemberOfState {
  c10::IValue state;
  int64_t member = 0;
};

// The list entry `key` of each pick's dict, one value per member: the new
// array's list [picks[0]'s value, picks[1]'s, ...]. std::invalid_argument
// if a dict lacks it or it is shorter than the member's index.
c10::IValue gatherListEntry(const std::vector<MemberOfState>& picks, const std::string& key);
// The entry `key`, which every pick's dict must hold with one value (an
// epoch count, a name); std::invalid_argument naming `what` otherwise.
c10::IValue sameEntry(const std::vector<MemberOfState>& picks, const std::string& key, const std::string& what);
// A dict whose entries are all per-member lists, but for the `same` ones.
c10::IValue gatherListDict(const std::vector<MemberOfState>& picks, const std::vector<std::string>& same = {});

}  // namespace hfta
