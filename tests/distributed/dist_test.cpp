// hfta::distributed: torchrun's environment read as torchrun sets it, and ranks
// that sum and broadcast tensors through c10d's Gloo backend: two processes of
// dist_rank_check.cpp (fork and exec: a process that has run OpenMP must
// not go on computing after a bare fork); the parent serves the store, as
// torchrun's agent does.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "distributed/world.h"
#include "support/user_error.h"

namespace hfta {
namespace {

// Sets environment variables for one test and restores them after.
class Environment {
 public:
  void set(const std::string& name, const std::string& value) {
    remember(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    remember(name);
    ::unsetenv(name.c_str());
  }
  ~Environment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  void remember(const std::string& name) {
    if (saved_.count(name)) return;
    const char* value = std::getenv(name.c_str());
    saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(WorldFromEnvironment, OneProcessWithoutWorldSize) {
  Environment env;
  env.unset("WORLD_SIZE");
  EXPECT_FALSE(distributed::worldFromEnvironment().has_value());
}

TEST(WorldFromEnvironment, ReadsWhatTorchrunSets) {
  Environment env;
  env.set("WORLD_SIZE", "4");
  env.set("RANK", "3");
  env.set("LOCAL_RANK", "1");
  env.set("MASTER_ADDR", "10.0.0.7");
  env.set("MASTER_PORT", "29500");
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  env.set("TORCHELASTIC_RESTART_COUNT", "2");
  const auto world = distributed::worldFromEnvironment();
  ASSERT_TRUE(world.has_value());
  EXPECT_EQ(world->size, 4);
  EXPECT_EQ(world->rank, 3);
  EXPECT_EQ(world->local_rank, 1);
  EXPECT_EQ(world->master_addr, "10.0.0.7");
  EXPECT_EQ(world->master_port, 29500);
  EXPECT_TRUE(world->agent_store);
  EXPECT_EQ(world->restart_count, 2);
}

TEST(WorldFromEnvironment, NamesTheVariableThatIsWrong) {
  Environment env;
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_PORT", "29500");
  env.unset("LOCAL_RANK");
  env.set("RANK", "2");  // out of range
  try {
    distributed::worldFromEnvironment();
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK=\"2\""), std::string::npos) << e.what();
  }
  env.unset("RANK");
  try {
    distributed::worldFromEnvironment();
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK is not"), std::string::npos) << e.what();
  }
}

// Starts dist_rank_check as ranks 0 and 1 (with `mode` as its argument)
// while this process serves their store, and expects both to exit 0.
void runTwoRanks(const char* mode) {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  c10d::TCPStore store("127.0.0.1", options);
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("WORLD_SIZE", "2", 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(store.getPort()).c_str(), 1);
      ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
      const char* argv[] = {HFTA_DIST_RANK_CHECK, mode, nullptr};
      ::execv(HFTA_DIST_RANK_CHECK, const_cast<char**>(argv));
      ::_exit(127);
    }
    ranks.push_back(pid);
  }
  for (const pid_t pid : ranks) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a rank failed (its output is above)";
  }
}

TEST(DistributedGroup, SumsAndBroadcastsAcrossTwoRanks) { runTwoRanks("--collectives"); }

// Gradients summed while backward runs: the buckets of the parameters that
// got gradients start before backward returns.
TEST(DistributedGroup, SumsGradientsAsBackwardProducesThem) { runTwoRanks("--gradients"); }

// Rank 1 exits after joining; rank 0's next all-reduce fails with a
// CollectiveError rather than waiting for ever.
TEST(DistributedGroup, ARankThatLeavesFailsTheOthersCollective) { runTwoRanks("--leave"); }

}  // namespace
}  // namespace hfta
