#include "spec/status.h"

#include <array>

#include "spec/enum_names.h"

namespace shardscope::spec {
namespace {

constexpr std::array<EnumName<RunStatus>, 8> kRunStatus{{{RunStatus::queued, "queued"},
                                                         {RunStatus::running, "running"},
                                                         {RunStatus::complete, "complete"},
                                                         {RunStatus::stopped, "stopped"},
                                                         {RunStatus::pruned, "pruned"},
                                                         {RunStatus::failed, "failed"},
                                                         {RunStatus::oom, "oom"},
                                                         {RunStatus::infeasible, "infeasible"}}};
constexpr std::array<EnumName<ErrorKind>, 7> kErrorKind{{{ErrorKind::oom, "oom"},
                                                         {ErrorKind::peer_lost, "peer_lost"},
                                                         {ErrorKind::config, "config"},
                                                         {ErrorKind::data, "data"},
                                                         {ErrorKind::io, "io"},
                                                         {ErrorKind::disk_full, "disk_full"},
                                                         {ErrorKind::internal, "internal"}}};
constexpr std::array<EnumName<DoneStatus>, 3> kDoneStatus{{{DoneStatus::complete, "complete"},
                                                           {DoneStatus::stopped, "stopped"},
                                                           {DoneStatus::failed, "failed"}}};

}  // namespace

std::string_view to_string(RunStatus status) { return name_of(kRunStatus, status, "unknown"); }
std::string_view to_string(ErrorKind kind) { return name_of(kErrorKind, kind, "unknown"); }
std::string_view to_string(DoneStatus status) { return name_of(kDoneStatus, status, "unknown"); }
std::optional<RunStatus> parse_run_status(std::string_view name) {
  return value_of(kRunStatus, name);
}
std::optional<ErrorKind> parse_error_kind(std::string_view name) {
  return value_of(kErrorKind, name);
}
std::optional<DoneStatus> parse_done_status(std::string_view name) {
  return value_of(kDoneStatus, name);
}

std::string error_kind_names() {
  std::string out;
  for (std::size_t i = 0; i < kErrorKind.size(); ++i) {
    if (i > 0) out += i + 1 == kErrorKind.size() ? " or " : ", ";
    out += kErrorKind[i].name;
  }
  return out;
}

bool is_final(RunStatus status) {
  return status != RunStatus::queued && status != RunStatus::running;
}

}  // namespace shardscope::spec
