// What a model file is, told from its archive's records (io/archive_kind.h);
// the .pt2 kinds and torch.save's are in lit/hfta-fuse-error.test, made by
// PyTorch itself.
#include "io/archive_kind.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_support.h"

namespace hfta {
namespace {

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("archive_kind_{}_{}", ::getpid(), name)).string();
}

TEST(ArchiveKind, TellsTorchScriptFromOtherZipsAndFromNonZips) {
  EXPECT_EQ(archiveKind(testing::memberPaths("mlp")[0]), ArchiveKind::TorchScript);

  const auto other = scratch("other.zip");
  {
    caffe2::serialize::PyTorchStreamWriter writer(other);
    const std::string text = "notes";
    writer.writeRecord("notes.txt", text.data(), text.size());
    writer.writeEndOfFile();
  }
  EXPECT_EQ(archiveKind(other), ArchiveKind::OtherZip);

  const auto text = scratch("text.pt");
  std::ofstream(text) << "not an archive\n";
  EXPECT_EQ(archiveKind(text), ArchiveKind::NotAZip);
  EXPECT_EQ(archiveKind(scratch("missing.pt")), ArchiveKind::NotAZip);
  std::filesystem::remove(other);
  std::filesystem::remove(text);
}

}  // namespace
}  // namespace hfta
