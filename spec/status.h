// The one list of run statuses and error kinds, shared by the trainer, backend, CLI and GUI.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shardscope::spec {

/// Lifecycle of a run (a trial). Stored as its name in the run log.
enum class RunStatus { queued, running, complete, stopped, pruned, failed, oom, infeasible };

/// Why a rank failed: the `kind` of an `error` event. disk_full: a write found no space (ENOSPC,
/// EDQUOT) or passed the file size limit (EFBIG); io is every other file or folder failure.
enum class ErrorKind { oom, peer_lost, config, data, io, disk_full, internal };

/// How a rank ended: the `status` of a `done` event (a subset of RunStatus).
enum class DoneStatus { complete, stopped, failed };

std::string_view to_string(RunStatus status);
std::string_view to_string(ErrorKind kind);
std::string_view to_string(DoneStatus status);
std::optional<RunStatus> parse_run_status(std::string_view name);
std::optional<ErrorKind> parse_error_kind(std::string_view name);
std::optional<DoneStatus> parse_done_status(std::string_view name);
/// Every error kind's name, in order, as a message lists them: "oom, peer_lost, ... or internal".
std::string error_kind_names();

/// True for statuses a run never leaves.
bool is_final(RunStatus status);

}  // namespace shardscope::spec
