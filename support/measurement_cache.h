#pragma once
// Where hfta keeps what it measured on this machine (the autotuner's forms,
// hfta-tune's array sizes), so that later processes start at once: JSON
// objects in files of one cache folder, each entry keyed by what the
// measurement depends on, the processor's model among it.
#include <nlohmann/json.hpp>

#include <string>

namespace hfta {

// The file `name` in $HFTA_CACHE_DIR, else $XDG_CACHE_HOME/hfta, else
// ~/.cache/hfta; "" where none of them is set.
std::string cacheFile(const std::string& name);
// The JSON object in `path`: {} if it is missing or unreadable (what it
// held is measured anew).
nlohmann::json readCacheFile(const std::string& path);
// Sets `key` in the object in `path`, re-read first under a lock on
// `path`.lock (another process may be adding its own), and writes it whole
// through a temporary file. Best effort: a cache that cannot be written
// costs later processes a measurement (said once on stderr), and they may
// choose differently.
void updateCacheFile(const std::string& path, const std::string& key, const nlohmann::json& value);

// The processor's model name, from /proc/cpuinfo.
const std::string& processorModel();

}  // namespace hfta
