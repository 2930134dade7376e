// The checks of an archive's pickles before LibTorch reads them
// (io/archive_check.h, io/pickle_scan.h): lengths and memo indices
// that would make LibTorch's unpickler allocate without bound are found;
// what PyTorch writes passes.
#include "io/archive_check.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <filesystem>

#include "io/pickle_scan.h"
#include "tests/test_support.h"

namespace {

using hfta::pickleHazard;

std::string pickled(const c10::IValue& value) {
  std::vector<at::Tensor> tensors;
  const auto bytes = torch::jit::pickle(value, &tensors);
  return {bytes.begin(), bytes.end()};
}

// What LibTorch's pickler writes: memo entries, long strings, ints, floats,
// lists and dicts, nested.
c10::IValue everyKindOfValue() {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("a long string", std::string(300, 'x'));
  dict.insert("list", c10::List<int64_t>({1, 1000, -70000, int64_t{1} << 40}));
  dict.insert("float", 0.25);
  const auto shared = c10::ivalue::Tuple::create({std::string("shared"), true, c10::IValue()});
  return c10::ivalue::Tuple::create({dict, shared, shared, c10::List<double>({1.5, -2.0})});
}

TEST(PickleScan, RealPicklesPass) {
  const auto bytes = pickled(everyKindOfValue());
  EXPECT_EQ(pickleHazard(bytes.data(), bytes.size()), std::nullopt);
  // And LibTorch reads them back: the walk saw a pickle it accepts.
  EXPECT_NO_THROW(torch::jit::unpickle(bytes.data(), bytes.size()));
}

// Every prefix is walked without reading past its end; what the walk
// passes, LibTorch refuses with an error of its own.
TEST(PickleScan, TruncatedPicklesAreWalkedSafely) {
  const auto bytes = pickled(everyKindOfValue());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    const auto hazard = pickleHazard(bytes.data(), cut);
    if (hazard) {
      EXPECT_EQ(hazard->rfind("a string of ", 0), 0) << "cut at " << cut << ": " << *hazard;
    } else {
      EXPECT_THROW(torch::jit::unpickle(bytes.data(), cut), c10::Error) << "cut at " << cut;
    }
  }
}

// PROTO 2, then `body`, then STOP.
std::string pickleOf(const std::string& body) { return std::string("\x80\x02", 2) + body + "."; }

TEST(PickleScan, AStringLongerThanThePickleIsAHazard) {
  // BINUNICODE declaring 0x7fffffff bytes, then 3.
  const auto bytes =
      pickleOf(std::string("X\xff\xff\xff\x7f"
                           "abc",
                           8));
  const auto hazard = pickleHazard(bytes.data(), bytes.size());
  ASSERT_TRUE(hazard.has_value());
  EXPECT_NE(hazard->find("2147483647 bytes where 4 remain"), std::string::npos) << *hazard;
  // BINUNICODE8 with a negative length.
  const auto negative =
      pickleOf(std::string("\x8d\xff\xff\xff\xff\xff\xff\xff\xff"
                           "abc",
                           12));
  EXPECT_TRUE(pickleHazard(negative.data(), negative.size()).has_value());
}

TEST(PickleScan, AMemoIndexBeyondThePickleIsAHazard) {
  // NONE, LONG_BINPUT 0x10000000: LibTorch would grow its memo table to
  // 268M entries (4 GiB) before storing one value.
  const auto bytes = pickleOf(std::string("Nr\x00\x00\x00\x10", 6));
  const auto hazard = pickleHazard(bytes.data(), bytes.size());
  ASSERT_TRUE(hazard.has_value());
  EXPECT_NE(hazard->find("memo index (268435456)"), std::string::npos) << *hazard;
  // An index a pickle of this size can hold passes.
  const auto small = pickleOf(std::string("Nr\x03\x00\x00\x00", 6));
  EXPECT_EQ(pickleHazard(small.data(), small.size()), std::nullopt);
}

TEST(PickleScan, TheWalkFollowsArgumentsNotBytes) {
  // The string's contents spell a LONG_BINPUT with a huge index: read as a
  // string's bytes, they are no hazard.
  const auto bytes = pickleOf(std::string("X\x06\x00\x00\x00r\xff\xff\xff\x7fN", 11));
  EXPECT_EQ(pickleHazard(bytes.data(), bytes.size()), std::nullopt);
}

// Every archive the test setup scripted from Python (members of every
// family, Transformers with nn.MultiheadAttention, whose debug information
// holds ranges past their text) passes; a fused module does too
// (tests/passes/split_test.cpp).
TEST(ArchiveCheck, WhatPyTorchWritesPasses) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(hfta::testing::modelsDir())) {
    if (entry.path().extension() != ".pt") continue;
    EXPECT_NO_THROW(hfta::checkArchivePickles(entry.path().string(), 0)) << entry.path();
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

}  // namespace
