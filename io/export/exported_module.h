#pragma once
// A member given as torch.export programs, made a TorchScript module: the
// module tree of its parameters' and buffers' qualified names, the tensors
// from the archive, and a forward that runs the training program in
// train() and the evaluation program in eval().
//
// Which programs an archive holds:
//   - "train" and "eval" (hfta.export, or torch's package_pt2 with those
//     names): one for each mode.
//   - one program (torch.export.save): the mode its operators record
//     (dropout's train flag, batch norm's training flag with running
//     statistics, num_batches_tracked counting); calling the fused module
//     in the other mode raises. A program none of whose operators depends
//     on the mode serves both.
#include <torch/script.h>

#include <string>
#include <vector>

#include "io/export/pt2_reader.h"

namespace hfta::exported {

// UserError (naming `label`, the node and its line) for what cannot be
// translated.
torch::jit::Module moduleFromPrograms(const std::vector<Program>& programs, const std::string& label);

}  // namespace hfta::exported
