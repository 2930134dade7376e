#pragma once
// The record hfta::fuse leaves on a fused module's root, which the loaders
// (hfta/io.h: isFused, arraySize, sharedInput), hfta::split and the
// trainers read back.
namespace hfta::record {

inline constexpr const char* kArraySize = "hfta_array_size";      // int: B
inline constexpr const char* kSources = "hfta_sources";           // List[str]: each member's file
inline constexpr const char* kSharedInput = "hfta_shared_input";  // bool
// One member's inlined forward, on member-shaped tensors: what split returns.
inline constexpr const char* kMemberForward = "hfta_member_forward";
// The fused module's classes: the members' classes renamed into this
// namespace (__torch__.Net -> __torch__.hfta_fused.Net).
inline constexpr const char* kFusedClassPrefix = "__torch__.hfta_fused.";

}  // namespace hfta::record
