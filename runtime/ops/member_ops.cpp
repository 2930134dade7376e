// Views and conversions between one member's value and the stacked array.
#include "runtime/ops/ops.h"

namespace hfta::ops {

at::Tensor align(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() >= 1, "hfta::align: expected a stacked tensor, got a 0-dim one");
  auto aligned = self;
  while (aligned.dim() < other.dim()) aligned = aligned.unsqueeze(1);
  return aligned;
}

at::Tensor expand_members(const at::Tensor& t, int64_t array_size) {
  if (t.size(0) == array_size) return t;
  auto sizes = t.sizes().vec();
  sizes[0] = array_size;
  return t.expand(sizes);
}

at::Tensor broadcast_to_members(const at::Tensor& self, int64_t array_size) {
  std::vector<int64_t> sizes{array_size};
  sizes.insert(sizes.end(), self.sizes().begin(), self.sizes().end());
  return self.unsqueeze(0).expand(sizes);
}

std::vector<at::Tensor> broadcast_list_to_members(at::TensorList self, int64_t array_size) {
  std::vector<at::Tensor> out;
  for (const auto& t : self) out.push_back(broadcast_to_members(t, array_size));
  return out;
}

at::Tensor fold_channels(const at::Tensor& array, int64_t array_size) {
  TORCH_CHECK(array.dim() >= 3, "hfta::fold_channels: expected members [B, N, C, ...], got ", array.sizes());
  return expand_members(array, array_size).transpose(0, 1).flatten(1, 2);
}

at::Tensor unfold_channels(const at::Tensor& folded, int64_t array_size) {
  TORCH_CHECK(folded.dim() >= 2 && folded.size(1) % array_size == 0, "hfta::unfold_channels: expected [N, ", array_size,
              " * C, ...], got ", folded.sizes());
  return folded.unflatten(1, {array_size, -1}).transpose(0, 1);
}

at::Tensor repeat(const at::Tensor& array, at::IntArrayRef repeats) {
  const int64_t member_dims = array.dim() - 1;
  TORCH_CHECK(static_cast<int64_t>(repeats.size()) >= member_dims, "hfta::repeat: ", repeats.size(),
              " repeats for members with ", member_dims, " dims");
  // New leading member dims go after the member dim.
  auto shape = array.sizes().vec();
  shape.insert(shape.begin() + 1, repeats.size() - member_dims, 1);
  std::vector<int64_t> stacked{1};
  stacked.insert(stacked.end(), repeats.begin(), repeats.end());
  return array.reshape(shape).repeat(stacked);
}

at::Tensor index(const at::Tensor& array, const c10::List<std::optional<at::Tensor>>& indices, bool shared_indices) {
  const int64_t members = array.size(0);
  std::vector<std::optional<at::Tensor>> own;  // each index as the members' [B, ...]
  bool gather = !indices.empty();
  int64_t rank = 0;
  for (const std::optional<at::Tensor> index : indices) {
    if (!index.has_value() || !index->defined()) {
      gather = false;
      own.emplace_back();
      continue;
    }
    own.push_back(shared_indices ? broadcast_to_members(*index, members) : *index);
    const auto type = own.back()->scalar_type();
    gather = gather && (type == at::kLong || type == at::kInt);
    rank = std::max(rank, own.back()->dim());
  }
  if (gather) {
    // Member b's indices pick from member b's slice: the member index goes
    // first, and the indices' member dims line up behind it.
    std::vector<int64_t> shape(rank, 1);
    shape[0] = members;
    c10::List<std::optional<at::Tensor>> all;
    all.push_back(at::arange(members, array.options().dtype(at::kLong)).view(shape));
    for (auto& index : own) {
      auto aligned = *index;
      while (aligned.dim() < rank) aligned = aligned.unsqueeze(1);
      all.push_back(aligned);
    }
    return at::index(array, all);
  }
  // Masks and skipped dims (None) place their results by rules of their
  // own: each member alone.
  std::vector<at::Tensor> results;
  for (int64_t b = 0; b < members; ++b) {
    c10::List<std::optional<at::Tensor>> mine;
    for (const auto& index : own) mine.push_back(index ? std::optional<at::Tensor>(index->select(0, b)) : std::nullopt);
    results.push_back(at::index(array.select(0, b), mine));
  }
  return at::stack(results);
}

std::vector<int64_t> folded_member_sizes(const at::Tensor& folded, int64_t array_size) {
  auto sizes = folded.sizes().vec();
  TORCH_CHECK(sizes.size() >= 2, "hfta::folded_member_sizes: expected [N, B*C, ...], got ", folded.sizes());
  sizes[1] /= array_size;
  return sizes;
}

int64_t stacked_dim(int64_t dim) { return dim >= 0 ? dim + 1 : dim; }

std::vector<int64_t> stacked_dims(std::vector<int64_t> dims) {
  for (auto& d : dims) d = stacked_dim(d);
  return dims;
}

std::optional<at::Tensor> member(const std::optional<at::Tensor>& self, int64_t index) {
  if (!self.has_value() || !self->defined()) return std::nullopt;
  return self->select(0, index);
}

std::vector<at::Tensor> member_list(at::TensorList self, int64_t index) {
  std::vector<at::Tensor> out;
  out.reserve(self.size());
  for (const auto& t : self) out.push_back(t.select(0, index));
  return out;
}

c10::List<std::optional<at::Tensor>> member_optional_list(const c10::List<std::optional<at::Tensor>>& self,
                                                          int64_t index) {
  c10::List<std::optional<at::Tensor>> out;
  out.reserve(self.size());
  for (const std::optional<at::Tensor> t : self) out.push_back(member(t, index));
  return out;
}

namespace {

c10::IValue memberOf(const c10::IValue& value, int64_t index) {
  if (value.isTensor()) return value.toTensor().select(0, index);
  if (value.isList()) {
    auto list = value.toList();
    c10::impl::GenericList out(list.elementType());
    out.reserve(list.size());
    for (const c10::IValue& element : list) out.push_back(memberOf(element, index));
    return out;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const auto& element : value.toTupleRef().elements()) elements.push_back(memberOf(element, index));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  return value;  // None and non-tensor leaves: the same in every member
}

}  // namespace

void member_value(const c10::OperatorHandle& /*op*/, torch::jit::Stack* stack) {
  const int64_t index = stack->back().toInt();
  stack->pop_back();
  stack->back() = memberOf(stack->back(), index);
}

std::vector<at::Tensor> stack_members_list(const c10::List<c10::List<at::Tensor>>& members) {
  TORCH_CHECK(!members.empty(), "hfta::stack_members_list: no members");
  const size_t length = members.get(0).size();
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < length; ++i) {
    std::vector<at::Tensor> slices;
    for (const c10::List<at::Tensor> m : members) {
      TORCH_CHECK(m.size() == length, "hfta::stack_members_list: members returned lists of different lengths (", length,
                  " and ", m.size(), ")");
      slices.push_back(m.get(i));
    }
    out.push_back(at::stack(slices));
  }
  return out;
}

std::optional<at::Tensor> stack_members_optional(const c10::List<std::optional<at::Tensor>>& members) {
  std::vector<at::Tensor> slices;
  for (const std::optional<at::Tensor> m : members) {
    if (m.has_value() && m->defined()) slices.push_back(*m);  // (an undefined tensor is None too)
  }
  if (slices.empty()) return std::nullopt;
  TORCH_CHECK(slices.size() == members.size(),
              "hfta::stack_members_optional: some members returned None and others a tensor");
  return at::stack(slices);
}

bool stackable(const c10::List<std::optional<at::Tensor>>& tensors, int64_t array_size, bool distinct) {
  TORCH_CHECK(array_size > 0 && tensors.size() % array_size == 0, "hfta::stackable: ", tensors.size(),
              " tensors are not groups of ", array_size);
  std::vector<at::Tensor> group;
  for (size_t first = 0; first < tensors.size(); first += array_size) {
    group.clear();
    for (size_t i = first; i < first + array_size; ++i) {
      const std::optional<at::Tensor> t = tensors.get(i);
      if (t.has_value() && t->defined()) group.push_back(*t);
    }
    if (group.empty()) continue;  // None in every member
    if (group.size() != static_cast<size_t>(array_size)) return false;
    for (size_t i = 1; i < group.size(); ++i) {
      const auto& a = group[0];
      const auto& b = group[i];
      if (a.sizes() != b.sizes() || a.dtype() != b.dtype() || a.device() != b.device() || a.layout() != b.layout()) {
        return false;
      }
      for (size_t j = 0; distinct && j < i; ++j) {
        if (group[j].is_alias_of(b)) return false;
      }
    }
  }
  return true;
}

}  // namespace hfta::ops
