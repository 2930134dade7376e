// fuzz_inputs: damaged inputs must end in a clear error, never in a crash,
// a hang or an internal error. Mutates seed TorchScript archives (truncated,
// bytes flipped, an entry removed, an entry's contents damaged and the
// archive rewritten with valid checksums, so the damage reaches the
// unpickler and the TorchScript compiler) and seed IR texts (lines removed,
// duplicated or swapped, characters changed, text cut short), and runs what
// the commands run on them, in this process: hfta-fuse's load, fuse and
// save; hfta-split's split; hfta-opt's parse, verify-lockstep and fuse.
// Each case must end without an exception (a command's exit 0) or with
// hfta::UserError (exit 2); any other exception is what the commands report
// as an internal error (exit 1) and fails the run. A crash ends the run with
// the case's number on stderr; a case running past --case-seconds aborts.
//
//   fuzz_inputs --models DIR --ir-corpus lit/fuse.test ... --cases 3000 --seed 1
//
// IR seeds are the `//--- name.ir` sections of the --ir-corpus files (the
// lit tests' inputs).
//
// The same --seed and case number reproduce a case (--only N).
#include <CLI/CLI.hpp>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "hfta/hfta.h"
#include "passes/opt/registry.h"

namespace {

using Bytes = std::string;

Bytes readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void writeFile(const std::string& path, const Bytes& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// The records of a TorchScript archive, in order.
std::vector<std::pair<std::string, Bytes>> records(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  std::vector<std::pair<std::string, Bytes>> out;
  for (const auto& name : reader.getAllRecords()) {
    auto [data, size] = reader.getRecord(name);
    out.emplace_back(name, Bytes(static_cast<const char*>(data.get()), size));
  }
  return out;
}

// An archive of `entries` (names as the reader gives them, without the
// archive's folder), written as LibTorch writes one.
Bytes archive(const std::vector<std::pair<std::string, Bytes>>& entries) {
  Bytes out;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
      out.append(static_cast<const char*>(data), size);
      return size;
    });
    for (const auto& [name, bytes] : entries) {
      if (name == ".data/version" || name == "version") continue;  // the writer adds its own
      writer.writeRecord(name, bytes.data(), bytes.size());
    }
    writer.writeEndOfFile();
  }
  return out;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void flipBytes(Bytes& bytes, size_t count) {
    for (size_t i = 0; i < count && !bytes.empty(); ++i)
      bytes[below(bytes.size())] ^= static_cast<char>(1 + below(255));
  }

  // One damaged archive of the seed at `path`, and what was done to it.
  std::pair<Bytes, std::string> archiveCase(const std::string& path) {
    Bytes raw = readFile(path);
    switch (below(4)) {
      case 0: {
        const size_t keep = below(raw.size());
        raw.resize(keep);
        return {raw, fmt::format("truncated to {} bytes", keep)};
      }
      case 1: {
        const size_t count = 1 + below(16);
        flipBytes(raw, count);
        return {raw, fmt::format("{} bytes flipped", count)};
      }
      case 2: {
        auto entries = records(path);
        const size_t gone = below(entries.size());
        const auto name = entries[gone].first;
        entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(gone));
        return {archive(entries), "entry " + name + " removed"};
      }
      default: {
        auto entries = records(path);
        auto& [name, bytes] = entries[below(entries.size())];
        const std::string what = below(2) == 0 ? "cut short" : "bytes flipped";
        if (what == "cut short") {
          bytes.resize(below(bytes.size() + 1));
        } else {
          flipBytes(bytes, 1 + below(8));
        }
        return {archive(entries), "entry " + name + " " + what + " (checksums valid)"};
      }
    }
  }

  std::pair<std::string, std::string> irCase(const std::string& text) {
    std::vector<std::string> lines;
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    const size_t n = lines.size();
    switch (below(6)) {
      case 0: {
        const size_t i = below(n);
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
        return {join(lines), fmt::format("line {} removed", i + 1)};
      }
      case 1: {
        const size_t i = below(n);
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(below(n)), lines[i]);
        return {join(lines), fmt::format("line {} duplicated", i + 1)};
      }
      case 2: {
        const size_t i = below(n), j = below(n);
        std::swap(lines[i], lines[j]);
        return {join(lines), fmt::format("lines {} and {} swapped", i + 1, j + 1)};
      }
      case 3: {
        std::string out = text;
        const size_t count = 1 + below(4);
        static const std::string kChars = "%():,=[]{}0123456789abcxyz_.\" \n";
        for (size_t k = 0; k < count && !out.empty(); ++k) out[below(out.size())] = kChars[below(kChars.size())];
        return {out, fmt::format("{} characters changed", count)};
      }
      case 4: {
        const size_t keep = below(text.size());
        return {text.substr(0, keep), fmt::format("cut to {} characters", keep)};
      }
      default: {
        // A type annotation swapped for another: parses, means something else.
        std::string out = text;
        static const std::vector<std::pair<std::string, std::string>> kSwaps{
            {"Tensor", "int"}, {"int", "float"}, {"float", "Tensor"}, {"bool", "int"}, {"int[]", "Tensor[]"}};
        const auto& [from, to] = kSwaps[below(kSwaps.size())];
        const auto at = out.find(" : " + from);
        if (at != std::string::npos) out.replace(at + 3, from.size(), to);
        return {out, fmt::format("a `{}` annotation made `{}`", from, to)};
      }
    }
  }

 private:
  static std::string join(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
  std::mt19937_64 rng_;
};

enum class Outcome { Ok, UserError };

// What hfta-fuse and hfta-split do with a member file (the seed `first`
// and the damaged `path`, as members 0 and 1).
Outcome runArchive(const std::string& first, const std::string& path, const std::string& out) {
  try {
    auto members = std::vector<hfta::Member>{hfta::loadMember(first, 0), hfta::loadMember(path, 1)};
    if (hfta::isFused(members[1].module)) {  // hfta-split's part
      const int64_t size = hfta::arraySize(members[1].module);
      hfta::saveModule(hfta::split(members[1].module, size - 1), out);
      return Outcome::Ok;
    }
    auto fused = hfta::fuse(members);
    hfta::saveModule(fused.module, out);
    hfta::saveModule(hfta::split(fused.module, 1), out);
    return Outcome::Ok;
  } catch (const hfta::UserError&) {
    return Outcome::UserError;
  }
}

// What hfta-opt does with IR text: parse it, then verify-lockstep and fuse
// on two members (the damaged text and the seed), and on two copies of it.
Outcome runIr(const std::string& seed, const std::string& text) {
  try {
    for (const bool against_seed : {true, false}) {
      hfta::PassState state;
      state.graphs.push_back({hfta::parseGraph(against_seed ? seed : text, "graph 0"), "graph 0"});
      state.graphs.push_back({hfta::parseGraph(text, "graph 1"), "graph 1"});
      for (const char* pass : {"verify-lockstep", "fuse"}) {
        if (state.graphs.size() >= 2) hfta::findPass(pass).run(state);
      }
    }
    return Outcome::Ok;
  } catch (const hfta::UserError&) {
    return Outcome::UserError;
  }
}

int g_case = -1;
extern "C" void onTimeout(int) {
  const std::string message = "fuzz_inputs: case " + std::to_string(g_case) + " ran past --case-seconds (a hang)\n";
  (void)!::write(STDERR_FILENO, message.data(), message.size());
  std::_Exit(3);
}

// A crash names its case (then ends the process as the signal would).
extern "C" void onCrash(int signal_number) {
  const std::string message = "fuzz_inputs: case " + std::to_string(g_case) + " crashed (signal " +
                              std::to_string(signal_number) + "); --only " + std::to_string(g_case) +
                              " reproduces it\n";
  (void)!::write(STDERR_FILENO, message.data(), message.size());
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Feed damaged archives and IR to what the hfta commands run; exit 0 if every case ended cleanly."};
  std::string models;
  std::vector<std::string> corpus;
  int64_t cases = 1000, only = -1;
  uint64_t seed = 1;
  unsigned case_seconds = 30;
  app.add_option("--models", models, "the test setup's folder (make_test_models.py)")->required();
  app.add_option("--ir-corpus", corpus, "files with `//--- name.ir` sections: the IR seeds")->required();
  app.add_option("--cases", cases);
  app.add_option("--seed", seed);
  app.add_option("--only", only, "run only this case (to reproduce one)");
  app.add_option("--case-seconds", case_seconds, "a case running longer is a hang");
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> archive_seeds{"mlp_0.pt",      "lenet_0.pt", "wide_0.pt",
                                               "resblock_0.pt", "zoo_0.pt",   "generator_traced_0.pt"};
  const std::string tmp = fmt::format("/tmp/hfta_fuzz_{}", ::getpid());
  const std::string fused_seed = tmp + "_fused.pt";
  hfta::saveModule(hfta::fuse(hfta::loadMembers({models + "/mlp_0.pt", models + "/mlp_1.pt"})).module, fused_seed);
  std::vector<std::pair<std::string, std::string>> ir_seeds;  // (name, text)
  for (const auto& path : corpus) {
    std::stringstream in(readFile(path));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("//--- ", 0) == 0) {
        ir_seeds.emplace_back(line.substr(6), "");
      } else if (!ir_seeds.empty()) {
        ir_seeds.back().second += line + "\n";
      }
    }
  }
  ir_seeds.erase(
      std::remove_if(ir_seeds.begin(), ir_seeds.end(),
                     [](const auto& s) { return s.first.size() < 3 || s.first.substr(s.first.size() - 3) != ".ir"; }),
      ir_seeds.end());
  for (const auto& [name, text] : ir_seeds) {
    try {
      hfta::parseGraph(text, name);
    } catch (const hfta::UserError& e) {
      fmt::print(stderr, "fuzz_inputs: the seed {} does not parse: {}\n", name, e.what());
      return 1;
    }
  }
  if (ir_seeds.empty()) {
    fmt::print(stderr, "fuzz_inputs: no `//--- name.ir` sections in --ir-corpus\n");
    return 1;
  }

  std::signal(SIGALRM, onTimeout);
  for (int crash : {SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGILL}) std::signal(crash, onCrash);
  std::map<std::string, int64_t> tally;
  int failures = 0;
  for (int64_t c = 0; c < cases; ++c) {
    if (only >= 0 && c != only) continue;
    g_case = static_cast<int>(c);
    Mutator mutate(seed * 1000003 + static_cast<uint64_t>(c));
    const bool is_archive = mutate.below(2) == 0;
    std::string what;
    ::alarm(case_seconds);
    try {
      Outcome outcome;
      if (is_archive) {
        const size_t s = mutate.below(archive_seeds.size() + 1);
        const std::string seed_path = s == archive_seeds.size() ? fused_seed : models + "/" + archive_seeds[s];
        auto [bytes, how] = mutate.archiveCase(seed_path);
        what = fmt::format("archive {}: {}", seed_path.substr(seed_path.rfind('/') + 1), how);
        if (only >= 0) fmt::print(stderr, "case {}: {}\n", c, what);
        writeFile(tmp + "_case.pt", bytes);
        const std::string first = s == archive_seeds.size() ? models + "/mlp_0.pt" : seed_path;
        outcome = runArchive(first, tmp + "_case.pt", tmp + "_out.pt");
      } else {
        const size_t s = mutate.below(ir_seeds.size());
        auto [text, how] = mutate.irCase(ir_seeds[s].second);
        what = fmt::format("IR {}: {}", ir_seeds[s].first, how);
        if (only >= 0) fmt::print(stderr, "case {}: {}\n--- its text:\n{}---\n", c, what, text);
        outcome = runIr(ir_seeds[s].second, text);
      }
      ++tally[std::string(is_archive ? "archive" : "IR") + (outcome == Outcome::Ok ? " ran" : " refused (exit 2)")];
    } catch (const std::exception& e) {
      ++failures;
      fmt::print(stderr, "fuzz_inputs: case {} ({}): internal error (exit 1): {}\n", c, what,
                 std::string(e.what()).substr(0, 400));
    }
    ::alarm(0);
  }
  for (const char* suffix : {"_case.pt", "_out.pt", "_fused.pt"}) std::remove((tmp + suffix).c_str());
  for (const auto& [outcome, count] : tally) fmt::print("{}: {}\n", outcome, count);
  fmt::print("fuzz_inputs: {} cases, {} internal errors (seed {})\n", only >= 0 ? 1 : cases, failures, seed);
  return failures == 0 ? 0 : 1;
}
