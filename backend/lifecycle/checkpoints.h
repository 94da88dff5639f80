// A run's checkpoints as its trainer recorded them (rank 0's `ckpt` events of every attempt):
// sharded ones (ckpt/step-NNNNNN in that attempt's run directory, what a run resumes from), and
// the full Hugging Face folders and PEFT adapters of an export. Each with its bytes on disk (0
// and `present` false once pruned by train.ckpt_keep or `gc --keep-best`) and the evaluation
// metrics rank 0 reported at its step. `shardscope-cli checkpoints` and the dashboard's
// Checkpoints dialog both list them through listCheckpoints; exportCheckpoint writes one as a
// Hugging Face folder or a PEFT adapter through the trainer's own `export` verb. Both block on
// the file system (or SSH): never on the GUI thread.
#pragma once

#include <QMap>
#include <QString>
#include <QStringList>

#include <vector>

#include "backend/lifecycle/runcleanup.h"
#include "backend/store/runreader.h"
#include "spec/result.h"

namespace shardscope::backend {

/// One checkpoint of a run.
struct CheckpointInfo {
  qint64 step = 0;
  QString kind;  ///< "sharded" (resumable), "full" (a Hugging Face folder) or "adapter" (PEFT)
  int attempt = 0;
  QString host;  ///< "" on this machine, else the SSH alias that holds it
  QString path;  ///< absolute, on `host`
  bool present = false;
  bool measured = false;  ///< false: its host could not be asked (`error` says why)
  qint64 bytes = 0;       ///< regular files under `path` (0 when not present)
  QString error;
  QMap<QString, double> eval;  ///< rank 0's `eval` metrics at `step` ("loss", ...), maybe none
  bool samples = false;        ///< rank 0 wrote probe answers (`sample` events) at `step`
};

/// Every checkpoint run `run` recorded, oldest attempt and step first, measured through
/// `cleaner` (one SSH connection per host). A run launched on a machine this one cannot reach is
/// listed unmeasured. An error only when the run log cannot be read.
[[nodiscard]] Result<std::vector<CheckpointInfo>> listCheckpoints(RunReader& reader,
                                                                  RunCleaner& cleaner,
                                                                  const RunRecord& run);

/// The sharded checkpoint of `run` at `step` that is on disk (the newest attempt's when several
/// wrote that step); an error naming the steps there are when there is none.
[[nodiscard]] Result<CheckpointInfo> findCheckpoint(
    const std::vector<CheckpointInfo>& all, const RunRecord& run, qint64 step,
    const QString& kind = QStringLiteral("sharded"));

/// What exportCheckpoint writes.
enum class ExportFormat {
  huggingFace,  ///< model.safetensors (LoRA merged) beside the base's config and tokenizer files
  peftAdapter,  ///< adapter_config.json and adapter_model.safetensors (runs with [lora] only)
};

/// Writes sharded checkpoint `checkpoint` of `run` into new folder `outDir` on this machine:
/// `<trainer> export trial.toml --checkpoint DIR --out OUT` (one process, any world size saved),
/// with the run's own trial.toml and trainer (`trainerDir` first for a bare launch.trainer). A
/// checkpoint on another host is refused (copy it here first). Returns the folder written.
[[nodiscard]] Result<QString> exportCheckpoint(const RunRecord& run,
                                               const CheckpointInfo& checkpoint,
                                               ExportFormat format, const QString& outDir,
                                               const QString& trainerDir = {});

}  // namespace shardscope::backend
