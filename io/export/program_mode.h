#pragma once
// Which mode (train() or eval()) an exported program was recorded in, read
// off the operators whose behaviour depends on it: export records the mode
// as constant flags, not as a branch on `training`.
#include <string>

#include "io/export/pt2_reader.h"

namespace hfta::exported {

enum class Mode { Training, Evaluation, Either };

// Either when no operator depends on the mode. UserError (naming a node of
// each) if some operators record training and others evaluation.
Mode recordedMode(const Program& program, const std::string& label);

const char* modeName(Mode mode);

}  // namespace hfta::exported
