#pragma once
// A training checkpoint: a folder holding the fused module (fused.pt) and
// everything else a run needs to go on exactly as if it had not stopped
// (state.pt: the optimizer's, scheduler's and loss scaler's state dicts,
// the mixed precision, the trainer's progress, the metrics so far, and the
// CPU random generator's state).
// Written to a fresh folder (DIR.partial) that then replaces the old one
// (moved aside to DIR.old until the new one is in place), so a checkpoint
// is either the old one or the whole new one.
#include <torch/script.h>

#include <string>
#include <vector>

#include "runtime/optim/grad_scaler.h"
#include "runtime/optim/member_state.h"
#include "runtime/optim/optimizer.h"
#include "train/schedule.h"
#include "train/trainer.h"

namespace hfta::train {

// A run's mixed precision: the autocast dtype's name ("none", "bfloat16",
// "float16"), which a resumed run must repeat, and the loss scaler whose
// state the checkpoint keeps (nullptr without).
struct CheckpointAmp {
  std::string dtype = "none";
  optim::FusedGradScaler* scaler = nullptr;
};

void saveCheckpoint(const std::string& dir, const torch::jit::Module& module, const optim::FusedOptimizer& optimizer,
                    const Schedule* schedule, const CheckpointAmp& amp, const Progress& progress,
                    const std::vector<MemberEpoch>& rows);

struct Resumed {
  Progress progress;
  std::vector<MemberEpoch> rows;
};

// The checkpoint folder to resume from: `dir`, or, when a save was stopped
// between its two renames and left only DIR.old, that one (and `note` says
// so). UserError if neither is a whole checkpoint.
std::string resolveCheckpoint(const std::string& dir, std::string* note);

// The module of a checkpoint (to build the optimizer over).
torch::jit::Module loadCheckpointModule(const std::string& dir);
// The state the checkpoint in `dir` keeps beside its module; UserError if
// there is none or it cannot be read.
c10::IValue readCheckpointState(const std::string& dir);
// Restores the optimizer, scheduler, loss scaler and random generator from
// a checkpoint's state (`where` names it in messages); returns the progress
// and metrics. UserError if it is not a checkpoint's, SettingError("amp")
// if it was trained with another precision.
Resumed restoreCheckpointState(const c10::IValue& state, const std::string& where, optim::FusedOptimizer& optimizer,
                               Schedule* schedule, const CheckpointAmp& amp);

// The state of a new array whose member b is member picks[b].member of the
// checkpoint state picks[b].state (optimizer and schedule state, loss
// scale, progress and metrics, renumbered). std::invalid_argument unless
// the members were trained the same way and stopped after the same epoch.
c10::IValue gatherCheckpointStates(const std::vector<MemberOfState>& picks);

}  // namespace hfta::train
