#include "io/archive_check.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "io/pickle_scan.h"
#include "support/error_summary.h"
#include "support/strings.h"
#include "support/user_error.h"

namespace hfta {
namespace {

struct Damaged {
  std::string what;
};

void require(bool ok, const char* what) {
  if (!ok) throw Damaged{what};
}

// LibTorch reads a debug_pkl on first use (ConcreteSourceRangeUnpickler,
// SourceRangeDeserializer in source_range_serialization.cpp), and indexes
// tuples and its string table without checking: a damaged record crashes
// the process. This checks each index it takes; a value of the wrong type
// throws c10::Error, which LibTorch's own reads would throw too. Either
// format: (FORMAT_WITH_STRING_TABLE, (str, ...), lines), whose sources are
// ([text index, ...], file name index, first line), or lines alone, whose
// sources are (text, file name, first line). A line is (byte offset,
// (source, start, end)[, tag]).
void checkSourceRanges(const c10::IValue& pickled) {
  const auto& top = pickled.toTupleRef().elements();
  require(!top.empty(), "it is empty");
  int64_t table_size = 0;  // the string table's texts
  c10::IValue lines = pickled;
  if (top[0].isString() && top[0].toStringRef() == "FORMAT_WITH_STRING_TABLE") {
    require(top.size() == 3, "its header is not (format, texts, lines)");
    for (const auto& text : top[1].toTupleRef().elements()) {
      text.toStringRef();
      ++table_size;
    }
    lines = top[2];
  }
  auto inTable = [&](int64_t i) { return i >= 0 && i < table_size; };
  for (const auto& line : lines.toTupleRef().elements()) {
    const auto& entry = line.toTupleRef().elements();
    require(entry.size() >= 2, "a line is not (offset, range)");
    entry[0].toInt();
    const auto& range = entry[1].toTupleRef().elements();
    require(range.size() == 3, "a range is not (source, start, end)");
    const auto& source = range[0].toTupleRef().elements();
    require(source.size() == 3, "a source is not (text, file name, first line)");
    if (table_size > 0) {
      for (const int64_t i : source[0].toIntList()) require(inTable(i), "a source's text is outside the string table");
      require(inTable(source[1].toInt()), "a file name is outside the string table");
    } else {
      source[0].toStringRef();
      source[1].toOptional<std::string>();
    }
    source[2].toInt();
    // Start and end are not checked against the text: LibTorch writes
    // ranges past their text (0 to 1 in an empty one) and reads them so.
    range[1].toInt();
    range[2].toInt();
  }
}

}  // namespace

void checkArchivePickles(const std::string& path, int64_t index) {
  std::vector<std::string> records;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
    records = reader->getAllRecords();
  } catch (const c10::Error&) {
    return;  // not a whole zip: loading it says so
  }
  for (const auto& name : records) {
    const bool debug_info = endsWith(name, ".debug_pkl");
    if (!debug_info && !endsWith(name, ".pkl")) continue;
    std::string why;
    try {
      const auto [data, size] = reader->getRecord(name);
      const auto* bytes = static_cast<const char*>(data.get());
      if (const auto hazard = pickleHazard(bytes, size)) {
        why = *hazard;
      } else if (debug_info) {
        checkSourceRanges(torch::jit::unpickle(bytes, size));
      }
    } catch (const Damaged& e) {
      why = e.what;
    } catch (const c10::Error& e) {
      why = errorSummary(e);
    }
    if (why.empty()) continue;
    throw UserError(fmt::format(
        "model {} ({}) is a damaged TorchScript archive: its record `{}` does not read ({}). Save the model again "
        "with torch.jit.save",
        index, path, name, why));
  }
}

}  // namespace hfta
