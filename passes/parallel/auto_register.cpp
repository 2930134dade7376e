// The registration library: linking hfta_register (with --no-as-needed, so
// that the linker keeps a library nothing calls) registers hfta's passes
// when the program loads.
#include "hfta/register.h"

namespace {
const bool kRegistered = (hfta::registerPasses(), true);
}  // namespace
